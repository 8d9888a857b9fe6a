"""Representation alignment (CRH/PAH) claims: exact identities (derived, machine precision) and the
paper's hypotheses (reconstructed, measured against Haar null baselines).

Source of the hypotheses: Ziyin, Chuang, Galanti, Poggio, "Formation of Representations in Neural
Networks", ICLR 2025 (arXiv 2410.03006). The paper's body text was not available: the identities
below are derived in this project, and the paper's theorems are reconstructed statements
(spec/crh.md). Every claim is built by a factory that takes the statement under test as an
argument, so tests can feed a false statement and see it REFUTED.
"""

from __future__ import annotations

import functools
import random as _random

import numpy as np
import sympy as sp

from proofs_check.core import (Check, Claim, Provenance, Verdict, close, condition, fmt, hypothesis_fails,
                               symbolic_true, symbolic_zero)
from solvers import crh as S
from theory import crh as T

FAMILY = "crh"
PAPER = "Ziyin, Chuang, Galanti, Poggio, ICLR 2025"
DERIVED_SRC = "spec/crh.md, exact identities (derived)"

#: Relative tolerance for exact identities on random O(1) matrices of size <= 12 in float64:
#: rounding gives ~1e-15 relative (a few ulps times the dimension); 1e-10 leaves 5 orders of margin
#: and is still 8 orders below any real violation seen (a wrong statement is off by O(1)).
IDENTITY_RTOL = 1e-10

#: Alignment equal to 1 "to machine precision" at an exact geometry (same rounding argument).
UNIT_ALIGNMENT_TOL = 1e-10

#: Numerical-rank threshold (singular value / largest) for "rank drops to the task dimension".
#: In the experiment the dropped directions sit at 1e-3 - 2e-2 and the kept ones above 0.3
#: (spec/crh.md run, measured here); 0.05 separates them. Ratios inside RANK_AMBIGUOUS
#: around the threshold make the rank undecidable (INCONCLUSIVE).
RANK_REL_TOL = 0.05
RANK_AMBIGUOUS = (0.02, 0.12)

#: A measured alignment counts as above its Haar null when it exceeds null mean + NULL_Z * std.
NULL_Z = 3.0
#: Mean alignment gain (over the six relations) required for "alignment increases with weight
#: decay"; a gain below -MIN_GAIN contradicts the statement (REFUTED).
MIN_GAIN = 0.10
#: A measured level statement ("all six alignments >= t") is contradicted when some alignment is
#: below t - LEVEL_MARGIN (seed-to-seed spread of single alignments in the quick run is ~0.03).
LEVEL_MARGIN = 0.05
#: The theorem assumes stationary weights: above this stationarity residual
#: ||E[g_b h_a^T] - gamma W|| / ||gamma W|| the hypothesis is taken to fail.
STATIONARY_TOL = 0.25


def _claim(id, statement, source, provenance, check, key=(), tags=()):
    return Claim(id=id, family=FAMILY, statement=statement, source=source, provenance=provenance,
                 check=check, key=tuple(key), tags=tuple(tags))


# --------------------------------------------------------------------------------------------
# Symbolic helpers
# --------------------------------------------------------------------------------------------

def _concretise(expr):
    """Replace undefined functions (l, phi) by concrete smooth ones so the expression can be
    evaluated numerically (for witnesses of a false statement)."""
    from sympy.core.function import AppliedUndef

    expr = sp.sympify(expr)
    for f in {a.func for a in expr.atoms(AppliedUndef)}:
        expr = expr.replace(f, lambda *args: sum(sp.sin(i + 1 + a) + a ** 2 / (i + 2) for i, a in enumerate(args)))
    return expr.doit()


def _substitutions(expr, seed: int, n: int = 2) -> list[dict]:
    rng = _random.Random(seed)
    out = []
    for _ in range(n):
        sub = {}
        for s in expr.free_symbols:
            lo = 0.3 if (s.is_positive or s.is_nonnegative) else -1.5
            sub[s] = sp.Float(rng.uniform(lo, 1.7), 20)
        out.append(sub)
    return out


def symbolic_checks(items: dict, seed: int = 0) -> list[Check]:
    """Checks for {name: matrix/expression} (must be 0) or {name: ("zero"|"true", obj)}."""
    out = []
    for name, obj in items.items():
        kind, obj = obj if isinstance(obj, tuple) else ("zero", obj)
        if kind == "true":
            out.append(symbolic_true(f"symbolic: {name}", obj))
            continue
        entries = list(obj) if hasattr(obj, "shape") else [obj]
        bad = [e for e in entries if sp.simplify(e) != 0]
        if not bad:
            out.append(Check(f"symbolic: {name}", Verdict.VERIFIED,
                             f"all {len(entries)} entries simplify to 0", {"entries": len(entries)}))
            continue
        e = _concretise(bad[0])
        out.append(symbolic_zero(f"symbolic: {name}", e, substitutions=_substitutions(e, seed)))
    return out


def _rng(ctx, salt: int) -> np.random.Generator:
    return np.random.default_rng([ctx.seed, salt])


def _rel_err(A, B) -> float:
    return float(np.max(np.abs(np.asarray(A) - np.asarray(B))) / max(1.0, float(np.max(np.abs(B)))))


def _random_W(rng, shape, rank=None):
    m, n = shape
    r = min(m, n) if rank is None else rank
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, n)) / np.sqrt(r)


def _shapes(ctx):
    """(d_b, d_a, rank) instances: square, wide, tall, rank-deficient."""
    base = [(3, 3, 3), (2, 5, 2), (6, 3, 3), (5, 5, 2), (4, 7, 1)]
    return base + ([(12, 9, 9), (10, 10, 4), (8, 12, 5)] if ctx.full else [])


# --------------------------------------------------------------------------------------------
# Exact identities (derived)
# --------------------------------------------------------------------------------------------

def backprop_claim(predict_H_b=None, predict_G_a=None, *, id="crh.identity.backprop", statement=None) -> Claim:
    """g_a = W^T g_b, H_b = W H_a W^T, G_a = W^T G_b W (predictions replaceable)."""
    pH = predict_H_b or (lambda W, H: W @ H @ W.T)
    pG = predict_G_a or (lambda W, G: W.T @ G @ W)

    def check(ctx):
        for m, n in ((2, 3), (2, 2)):
            out = T.sym_backprop(m, n, predict_H_b=pH, predict_G_a=pG)
            yield from symbolic_checks({f"{k} (W {m}x{n})": v for k, v in out.items()}, ctx.seed)
        rng = _rng(ctx, 1)
        shapes = _shapes(ctx)
        worst_h = worst_g = 0.0
        for (m, n, r) in shapes:
            W = _random_W(rng, (m, n), r)
            X = rng.standard_normal((20, n))  # samples of h_a (rows)
            G = rng.standard_normal((20, m))  # samples of g_b
            M = S.layer_matrices(W, X, G)
            worst_h = max(worst_h, _rel_err(pH(W, M.H_a), M.H_b))
            worst_g = max(worst_g, _rel_err(pG(W, M.G_b), M.G_a))
        for nm, err in (("numeric: H_b = W H_a W^T", worst_h), ("numeric: G_a = W^T G_b W", worst_g)):
            yield close(nm, 0.0, err, rtol=0.0, atol=IDENTITY_RTOL, what="max relative error",
                        evidence={"instances": len(shapes), "shapes": shapes})

    return _claim(id, statement or "For h_b = W h_a: g_a = W^T g_b, H_b = W H_a W^T and G_a = W^T G_b W "
                  "(raw second moments).", DERIVED_SRC, Provenance.DERIVED, check,
                  key=("numeric: H_b = W H_a W^T.measured",))


def transfer_claim(shift: float = 1, *, id="crh.identity.transfer", statement=None) -> Claim:
    """W (W^T W)^p W^T = (W W^T)^(p + shift) for real p >= 0 (true for shift = 1)."""

    def check(ctx):
        yield from symbolic_checks(T.sym_transfer(shift=sp.nsimplify(shift)), ctx.seed)
        rng = _rng(ctx, 2)
        ps = (0.0, 0.5, 1.0, 2.3) + ((1 / 3, 3.0, 0.01) if ctx.full else ())
        worst = 0.0
        phi_err = 0.0
        for (m, n, r) in _shapes(ctx):
            W = _random_W(rng, (m, n), r)
            for p in ps:
                lhs = W @ T.psd_power(W.T @ W, p) @ W.T
                rhs = T.psd_power(W @ W.T, p + shift)
                worst = max(worst, _rel_err(lhs, rhs))
            # H_a = V phi(S^2) V^T  =>  H_b = U S^2 phi(S^2) U^T (phi = exp here)
            U, s, Vt = np.linalg.svd(W, full_matrices=False)
            H_a = Vt.T @ np.diag(np.exp(s ** 2)) @ Vt
            phi_err = max(phi_err, _rel_err(W @ H_a @ W.T, U @ np.diag(s ** 2 * np.exp(s ** 2)) @ U.T))
        yield close("numeric: transfer on random W (shapes x ranks x p)", 0.0, worst, rtol=0.0,
                    atol=IDENTITY_RTOL, what="max relative error", evidence={"p": list(ps)})
        yield close("numeric: H_b = U S^2 phi(S^2) U^T", 0.0, phi_err, rtol=0.0, atol=IDENTITY_RTOL,
                    what="max relative error")

    return _claim(id, statement or f"Transfer: W (W^T W)^p W^T = (W W^T)^(p+{fmt(shift)}) for real p >= 0, "
                  "and H_a = V phi(S^2) V^T gives H_b = U S^2 phi(S^2) U^T.", DERIVED_SRC, Provenance.DERIVED,
                  check, key=("measured",))


def scaled_projector_claim(eigenvalues=lambda c: (0.0, c), *, id="crh.identity.scaled_projector",
                           statement=None) -> Claim:
    """Symmetric A with A^2 = cA iff its eigenvalues lie in ``eigenvalues(c)`` (true: {0, c}); full
    CRH forces equal nonzero singular values of W."""

    def check(ctx):
        yield from symbolic_checks(T.sym_scaled_projector(), ctx.seed)
        rng = _rng(ctx, 3)
        worst, conv_err = 0.0, 0.0
        for d, c in ((4, 1.0), (6, 2.5), (7, 0.3)):
            Q = S.haar_orthogonal(d, 1, rng)[0]
            allowed = np.array(eigenvalues(c), dtype=float)
            lam = allowed[rng.integers(0, len(allowed), d)]
            lam[0] = allowed[-1]
            A = Q @ np.diag(lam) @ Q.T
            worst = max(worst, _rel_err(A @ A, c * A))
            # converse: any other eigenvalue gives ||A^2 - cA||_F = sqrt(sum (l^2 - c l)^2) > 0
            lam2 = lam.copy()
            lam2[-1] = 0.5 * c
            B = Q @ np.diag(lam2) @ Q.T
            conv_err = max(conv_err, abs(np.linalg.norm(B @ B - c * B) -
                                         np.sqrt(np.sum((lam2 ** 2 - c * lam2) ** 2))))
        yield close("numeric: A^2 = cA for eigenvalues in the stated set", 0.0, worst, rtol=0.0,
                    atol=IDENTITY_RTOL, what="max relative error")
        yield close("numeric: ||A^2 - cA||_F = sqrt(sum (l^2 - c l)^2) otherwise", 0.0, conv_err, rtol=0.0,
                    atol=IDENTITY_RTOL, what="absolute error")
        # Full CRH: H_a = Z_a gives H_b = Z_b^2; b-RWA alignment is 1 iff nonzero singular values equal.
        U = S.haar_orthogonal(5, 1, rng)[0]
        V = S.haar_orthogonal(5, 1, rng)[0]
        s_eq = np.array([1.3, 1.3, 1.3, 0, 0])
        s_ne = np.array([2.0, 1.0, 0.5, 0, 0])
        cos = []
        for s in (s_eq, s_ne):
            W = U @ np.diag(s) @ V.T
            cos.append(S.alpha_cosine(W @ (W.T @ W) @ W.T, W @ W.T))
        pred_ne = np.sum(s_ne ** 6) / np.sqrt(np.sum(s_ne ** 8) * np.sum(s_ne ** 4))
        yield close("numeric: full CRH with equal singular values gives cos(H_b, Z_b) = 1", 1.0, cos[0],
                    rtol=0.0, atol=UNIT_ALIGNMENT_TOL, what="alignment")
        yield close("numeric: unequal singular values give cos = sum s^6 / sqrt(sum s^8 sum s^4) < 1",
                    pred_ne, cos[1], rtol=IDENTITY_RTOL, what="alignment")

    return _claim(id, statement or "For symmetric A, A^2 = cA iff every eigenvalue is 0 or c; full CRH "
                  "(H_a ~ Z_a and H_b ~ Z_b) forces Z^2 ~ Z: all nonzero singular values of W equal.",
                  DERIVED_SRC, Provenance.DERIVED, check)


def isotropy_claim(projector=None, *, id="crh.identity.isotropy_on_range", statement=None) -> Claim:
    """W (H_a - cI) W^T = 0 iff H_a compressed to ``projector(W)``'s range is c I (true: row space)."""

    def row_space(W):
        U, s, Vt = np.linalg.svd(W)
        r = int(np.sum(s > 1e-10 * s[0]))
        return Vt[:r].T @ Vt[:r]

    proj = projector or row_space

    def check(ctx):
        yield from symbolic_checks(T.sym_isotropy_on_range(), ctx.seed)
        rng = _rng(ctx, 4)
        worst, worst_break = 0.0, np.inf
        for (m, n, r) in _shapes(ctx):
            W = _random_W(rng, (m, n), r)
            P = proj(W)
            Qp = np.eye(n) - P
            K = rng.standard_normal((n, n))
            c = 1.7
            # c on the range of P, anything on the complement, arbitrary cross terms (kept PSD).
            X = Qp @ K @ K.T @ Qp + 0.3 * (P @ K @ Qp + Qp @ K.T @ P)
            H = c * P + X
            scale = np.linalg.norm(W) ** 2 * max(1.0, np.linalg.norm(H))
            worst = max(worst, float(np.max(np.abs(W @ (H - c * np.eye(n)) @ W.T))) / scale)
            # converse: a perturbation inside the range breaks it
            v = P @ rng.standard_normal(n)
            if np.linalg.norm(v) > 0:
                Hb = H + np.outer(v, v) / np.dot(v, v)
                worst_break = min(worst_break, float(np.linalg.norm(W @ (Hb - c * np.eye(n)) @ W.T)) / scale)
        yield close("numeric: W (H_a - cI) W^T = 0 when H_a is c I on the stated range", 0.0, worst, rtol=0.0,
                    atol=IDENTITY_RTOL, what="max relative entry")
        yield condition("numeric: a perturbation inside the range breaks it", worst_break > 1e3 * IDENTITY_RTOL,
                        verified=f"smallest relative violation {fmt(worst_break, 3)}",
                        refuted=f"violation only {fmt(worst_break, 3)}", evidence={"min_violation": worst_break})

    return _claim(id, statement or "W (H_a - cI) W^T = 0 iff H_a restricted (compressed) to the row space of W "
                  "is c times the identity there (b-RWA means H_a isotropic on row(W)).", DERIVED_SRC,
                  Provenance.DERIVED, check)


def one_step_claim(eta2_term=None, *, id="crh.identity.one_step", statement=None) -> Claim:
    """Delta Z_b = eta (S W^T + W S^T - 2 gamma Z_b) + eta^2 (S - gamma W)(S - gamma W)^T, exactly."""
    sec = eta2_term or (lambda S_, W, g: (S_ - g * W) @ (S_ - g * W).T)

    def check(ctx):
        yield from symbolic_checks(T.sym_one_step(eta2_coefficient=sec), ctx.seed)
        rng = _rng(ctx, 5)
        worst = 0.0
        for (m, n, r) in _shapes(ctx):
            W, Sb = _random_W(rng, (m, n), r), rng.standard_normal((m, n))
            eta, g = 0.07, 0.013
            Wn = W + eta * (Sb - g * W)
            pred = eta * (Sb @ W.T + W @ Sb.T - 2 * g * W @ W.T) + eta ** 2 * sec(Sb, W, g)
            worst = max(worst, _rel_err(Wn @ Wn.T - W @ W.T, pred))
        yield close("numeric: one SGD step on random W, S_bar", 0.0, worst, rtol=0.0, atol=IDENTITY_RTOL,
                    what="max relative error")

    return _claim(id, statement or "One SGD step Delta W = eta (S_bar - gamma W) changes Z_b = W W^T by exactly "
                  "eta (S_bar W^T + W S_bar^T - 2 gamma Z_b) + eta^2 (S_bar - gamma W)(S_bar - gamma W)^T "
                  "(dually for Z_a).", DERIVED_SRC, Provenance.DERIVED, check)


#: Small network for exact critical points in the quick profile (L-BFGS converges in ~1 s).
CRIT_QUICK = T.CRHExperiment(n_samples=64, widths=(6, 8, 8, 3), task_rank=2, steps=2, n_records=1)
CRIT_FULL = T.CRHExperiment(n_samples=128, widths=(8, 16, 16, 4), task_rank=2, steps=2, n_records=1)
CRIT_GAMMA = 0.05
#: A critical point counts as found when the largest gradient entry is below this (double-precision
#: L-BFGS on these objectives, values O(0.1), stalls at 1e-9 - 1e-10).
CRIT_GRAD_ACCEPT = 1e-7


@functools.lru_cache(maxsize=4)
def _critical(cfg: T.CRHExperiment, gamma: float):
    return S.critical_point(cfg, gamma, max_iter=5000)


def stationarity_claim(predict_b=None, predict_a=None, *, id="crh.identity.stationarity", statement=None) -> Claim:
    """At a critical point of loss + (gamma/2)||theta||^2: E[g_b h_a^T] = gamma W, so
    E[g_b h_b^T] = gamma Z_b and E[g_a h_a^T] = gamma Z_a (predictions replaceable)."""
    pb = predict_b or (lambda W, g: g * W @ W.T)
    pa = predict_a or (lambda W, g: g * W.T @ W)

    def check(ctx):
        yield from symbolic_checks({k: v for k, v in T.sym_stationarity(
            predict_b=lambda W, g: pb(W, g), predict_a=lambda W, g: pa(W, g)).items()
            if k.startswith("E[")}, ctx.seed)
        cfg = CRIT_FULL if ctx.full else CRIT_QUICK
        sol = _critical(cfg, CRIT_GAMMA)
        gmax = sol.diagnostics["grad_max"]
        if gmax > CRIT_GRAD_ACCEPT:
            yield hypothesis_fails("numeric: critical point", f"L-BFGS reached max |gradient| {fmt(gmax, 3)} > "
                                   f"{fmt(CRIT_GRAD_ACCEPT, 3)}", sol.diagnostics)
            return
        X, Y, _, _ = S.make_task(cfg)
        Ws = [sol.variables[f"W{l}"] for l in range(cfg.n_layers)]
        hs, gbs, _ = S.forward_backward(Ws, X, Y, cfg.activation)
        n = X.shape[0]
        g = CRIT_GAMMA
        errs = {"E[g_b h_a^T] - gamma W": 0.0, "E[g_b h_b^T] - pred": 0.0, "E[g_a h_a^T] - pred": 0.0}
        bounds = dict.fromkeys(errs, 0.0)
        for l, W in enumerate(Ws):
            ha, gb = hs[l], gbs[l]
            Sx = gb.T @ ha / n
            hb, ga = ha @ W.T, gb @ W
            grad = np.linalg.norm(Sx - g * W)  # = ||dF/dW_l|| at the point
            nW = np.linalg.norm(W)
            errs["E[g_b h_a^T] - gamma W"] = max(errs["E[g_b h_a^T] - gamma W"], float(np.max(np.abs(Sx - g * W))))
            errs["E[g_b h_b^T] - pred"] = max(errs["E[g_b h_b^T] - pred"], float(np.max(np.abs(gb.T @ hb / n - pb(W, g)))))
            errs["E[g_a h_a^T] - pred"] = max(errs["E[g_a h_a^T] - pred"], float(np.max(np.abs(ga.T @ ha / n - pa(W, g)))))
            # |E[g_b h_b^T] - gamma Z_b| = |(E[g_b h_a^T] - gamma W) W^T| <= ||grad||_F ||W||_F (+ rounding)
            bounds["E[g_b h_a^T] - gamma W"] = max(bounds["E[g_b h_a^T] - gamma W"], 2 * gmax)
            for k in ("E[g_b h_b^T] - pred", "E[g_a h_a^T] - pred"):
                bounds[k] = max(bounds[k], 2 * grad * nW + 1e-14)
        ev = {"grad_max": gmax, "iterations": sol.diagnostics["iterations"], "gamma": g,
              "widths": list(cfg.widths), "n_samples": cfg.n_samples}
        for k in errs:
            yield close(f"numeric at an L-BFGS critical point: {k}", 0.0, errs[k], rtol=0.0, atol=bounds[k],
                        what="max |entry|", evidence=ev)

    return _claim(id, statement or "At any critical point of loss + (gamma/2)||theta||^2 (E[Delta W] = 0): "
                  "E[g_b h_a^T] = gamma W, hence E[g_b h_b^T] = gamma Z_b and E[g_a h_a^T] = gamma Z_a.",
                  DERIVED_SRC, Provenance.DERIVED, check, key=("grad_max",))


def balance_claim(activation: str = "relu", *, id="crh.identity.relu_balance", statement=None) -> Claim:
    """Per-neuron balance for a positively homogeneous activation: gamma (|w_in|^2 - |w_out|^2)
    = <dF/dw_in, w_in> - <dF/dw_out, w_out> at every point (loss part cancels), so at a critical
    point diag(Z_b of layer l) = diag(Z_a of layer l+1). ``activation`` is the network tested."""

    def check(ctx):
        yield from symbolic_checks({k: v for k, v in T.sym_stationarity().items() if not k.startswith("E[")},
                                   ctx.seed)
        cfg = T.CRHExperiment(n_samples=64, widths=(6, 8, 8, 3), task_rank=2, steps=2, n_records=1,
                              activation=activation, seed=ctx.seed)
        X, Y, W0, _ = S.make_task(cfg)
        rng = _rng(ctx, 6)
        g = CRIT_GAMMA
        worst = 0.0
        for _ in range(3):  # arbitrary points, not only critical ones
            Ws = [W * (0.5 + rng.random()) for W in W0]
            _, grad = S.objective(S.pack(Ws), X, Y, cfg.widths, g, activation)
            Gs = S.unpack(grad, cfg.widths)
            for l in range(len(Ws) - 1):
                lhs = g * (np.sum(Ws[l] ** 2, axis=1) - np.sum(Ws[l + 1] ** 2, axis=0))
                rhs = np.sum(Gs[l] * Ws[l], axis=1) - np.sum(Gs[l + 1] * Ws[l + 1], axis=0)
                worst = max(worst, _rel_err(lhs, rhs))
            W0 = Ws
        yield close(f"numeric: gamma(|w_in|^2 - |w_out|^2) = <dF/dw_in, w_in> - <dF/dw_out, w_out> "
                    f"({activation})", 0.0, worst, rtol=0.0, atol=IDENTITY_RTOL, what="max relative error",
                    evidence={"activation": activation})

    return _claim(id, statement or "For ReLU networks with weight decay, gamma(||w_in||^2 - ||w_out||^2) equals the "
                  "rescaling derivative of the objective at every point, so at any critical point "
                  "diag(Z_b of layer l) = diag(Z_a of layer l+1) (per-neuron balance).", DERIVED_SRC,
                  Provenance.DERIVED, check)


def exponent_table_claim(reference=None, *, id="crh.pah.exponent_table", statement=None) -> Claim:
    """The nine-pair exponent table (sympy) against the hand-written reference; realised numerically
    by matrices with exact power laws."""
    ref = T.REFERENCE_PAIRS if reference is None else reference

    def check(ctx):
        table = T.exponent_table()
        mism = []
        for pair, want in ref.items():
            got = table[pair]
            got_xy = None if got["degenerate"] else (got["x"], got["y"])
            want_xy = None if want is None else (sp.Rational(want[0].numerator, want[0].denominator),
                                                 sp.Rational(want[1].numerator, want[1].denominator))
            if got_xy != want_xy:
                mism.append({"pair": "/".join(pair), "sympy": None if got_xy is None else [str(v) for v in got_xy],
                             "statement": None if want_xy is None else [str(v) for v in want_xy]})
        n_deg = sum(e["degenerate"] for e in table.values())
        ev = {"degenerate_pairs": n_deg, "finite_pairs": len(table) - n_deg, "mismatches": mism}
        if mism:
            yield Check("symbolic: exponent table (sympy linsolve) = statement", Verdict.REFUTED,
                        f"{len(mism)} pair(s) differ, e.g. {mism[0]}", ev)
        else:
            yield Check("symbolic: exponent table (sympy linsolve) = statement", Verdict.VERIFIED,
                        f"all {len(ref)} pairs agree ({len(table) - n_deg} finite, {n_deg} degenerate)", ev)
        vals = T.exponent_values(table)
        outside = sorted(str(v) for v in vals - T.REFERENCE_EXPONENT_SET)
        yield condition("symbolic: every finite exponent in {-1, 0, 1/3, 1/2, 1, 2, 3}", not outside,
                        verified=f"exponents {sorted(str(v) for v in vals)}", refuted=f"outside the set: {outside}",
                        evidence={"exponents": sorted(str(v) for v in vals)})
        # Numeric realisation: H_a = Z_a^x, G_b = Z_b^y on a random square W with distinct singular
        # values; the fitted PAH slopes must equal the stated Z-exponents.
        rng = _rng(ctx, 7)
        W = S.haar_orthogonal(6, 1, rng)[0] @ np.diag([2.0, 1.6, 1.3, 1.0, 0.8, 0.6]) @ S.haar_orthogonal(6, 1, rng)[0]
        Za, Zb = W.T @ W, W @ W.T
        worst = 0.0
        for pair, want in ref.items():
            if want is None:
                continue
            x, y = float(want[0]), float(want[1])
            H_a, G_b = T.psd_power(Za, x), T.psd_power(Zb, y)
            M = S.LayerMatrices(H_a, W @ H_a @ W.T, W.T @ G_b @ W, G_b, Za, Zb, "raw", 0)
            rep = S.report_from_matrices(M, null_draws=0)
            zexp = T.z_exponents(x, y)
            for k, nm in (("H_a~Z_a", "H_a"), ("G_a~Z_a", "G_a"), ("H_b~Z_b", "H_b"), ("G_b~Z_b", "G_b")):
                worst = max(worst, abs(rep.pah[k].slope - zexp[nm]))
            for rel in pair:  # the pair's two relations hold exactly
                worst = max(worst, abs(rep.alignments[rel]["cosine"] - 1.0))
        yield close("numeric: PAH slopes and pair alignments of exact power-law matrices", 0.0, worst, rtol=0.0,
                    atol=1e-8, what="max deviation")

    return _claim(id, statement or "Exponent bookkeeping: H_a ~ Z_a^x and G_b ~ Z_b^y give H_b ~ Z_b^(x+1), "
                  "G_a ~ Z_a^(y+1); of the nine pairs (one relation per side) six have finite exponents, "
                  "all in {-1, 0, 1/3, 1/2, 1, 2, 3}, three are degenerate (scaled projector).",
                  DERIVED_SRC, Provenance.DERIVED, check, key=("finite_pairs", "degenerate_pairs"))


# --------------------------------------------------------------------------------------------
# Neural collapse <-> CRH at the last layer; reparametrisation invariance (reconstructed)
# --------------------------------------------------------------------------------------------

nc_layer = S.nc_layer  # exact NC geometry at the last layer (solvers.crh)


def nc_claim(counts=(150, 20, 20, 20), predicted=None, *, id="crh.nc.last_layer", statement=None) -> Claim:
    """At an exact NC geometry all six alignments are 1 with balanced classes; with ``counts`` the
    alignments are ``predicted`` (default: RGA 1, the other four the closed form of
    theory.crh.nc_imbalanced_cosine)."""
    imb = float(T.nc_imbalanced_cosine(counts))
    pred = predicted or {r: (1.0 if r.endswith("RGA") else imb) for r in T.RELATION_NAMES}

    def check(ctx):
        k = len(counts)
        for d in (k, k + 2):
            W, H, G = nc_layer([max(counts)] * k, d)
            rep = S.alignment_report(W, H, G, null_draws=0)
            got = [rep.alignments[r][m] for r in T.RELATION_NAMES for m in ("pearson", "cosine")]
            yield close(f"balanced NC (k={k}, d={d}): all six alignments = 1 (Pearson and cosine)",
                        np.ones(len(got)), np.array(got), rtol=0.0, atol=UNIT_ALIGNMENT_TOL, what="alignments")
            W, H, G = nc_layer(counts, d)
            rep = S.alignment_report(W, H, G, null_draws=0)
            got = np.array([rep.alignments[r]["cosine"] for r in T.RELATION_NAMES])
            yield close(f"imbalanced NC {tuple(counts)} (d={d}): cosine alignments", np.array([pred[r] for r in T.RELATION_NAMES]),
                        got, rtol=0.0, atol=UNIT_ALIGNMENT_TOL, what="alignments",
                        evidence={"relations": list(T.RELATION_NAMES),
                                  "pearson": [rep.alignments[r]["pearson"] for r in T.RELATION_NAMES]})

    return _claim(id, statement or f"At an exact neural-collapse geometry (ETF means, W ~ M^T, label-only gradients) "
                  f"all six alignments equal 1 for balanced classes; with class counts {tuple(counts)} the RGA "
                  f"alignments stay 1 and the other four drop to {imb:.4f} (cosine).",
                  f"{PAPER}, NC as CRH at the last layer (reconstructed)", Provenance.RECONSTRUCTED, check,
                  key=("measured",))


#: A relation predicted to drop must be below 1 by more than this (the smallest drop in the
#: constructions of nc_broken_layer is ~0.005, b-RWA under NC3; rounding is ~1e-15).
NC_DROP_MIN = 1e-6


def nc_breaking_claim(unaffected=None, *, id="crh.nc.breaking", statement=None) -> Claim:
    """Breaking NC1, NC2 or NC3 (label-only gradients) keeps exactly the relations in
    ``unaffected[which]`` at 1 and lowers the others (default: theory.crh.NC_BREAK_UNAFFECTED)."""
    pattern = T.NC_BREAK_UNAFFECTED if unaffected is None else unaffected

    def check(ctx):
        for which, keep in pattern.items():
            W, H, G = S.nc_broken_layer(which, seed=ctx.seed)
            rep = S.alignment_report(W, H, G, null_draws=0)
            cos = {r: rep.alignments[r]["cosine"] for r in T.RELATION_NAMES}
            stay_bad = {r: cos[r] for r in keep if abs(cos[r] - 1.0) > UNIT_ALIGNMENT_TOL}
            drop_bad = {r: cos[r] for r in T.RELATION_NAMES if r not in keep and cos[r] > 1.0 - NC_DROP_MIN}
            ev = {"cosine": cos, "predicted_at_one": sorted(keep)}
            if stay_bad or drop_bad:
                yield Check(f"{which} broken", Verdict.REFUTED,
                            f"predicted 1 but lower: {stay_bad}; predicted lower but 1: {drop_bad}", ev)
            else:
                yield Check(f"{which} broken", Verdict.VERIFIED,
                            f"exactly {sorted(keep)} stay at 1, the other {6 - len(keep)} drop", ev)

    return _claim(id, statement or "With balanced classes and label-only gradients, breaking NC1 (isotropic scatter) "
                  "lowers only a-RGA and a-RWA; breaking NC2 lowers the three side-b alignments; breaking NC3 keeps "
                  "only a-GWA at 1.", "spec/crh.md, NC and CRH (pattern derived here)", Provenance.DERIVED, check)


def reparam_claim(invariant=("a-GWA", "b-GWA"), *, layers="hidden", id="crh.reparam.gwa_invariance",
                  statement=None) -> Claim:
    """Under f' = Qf (Q invertible, not orthogonal) with the compensating loss l'(f') = l(Q^{-1} f'),
    the alignments named in ``invariant`` ("NFA" = alpha_cos(Z_a, AGOP)) are unchanged in the
    ``layers`` ("hidden" or "all") layers."""

    def check(ctx):
        cfg = T.CRHExperiment(n_samples=128, widths=(6, 10, 10, 3), task_rank=2, steps=2, n_records=1,
                              seed=ctx.seed)
        X, Y, Ws, _ = S.make_task(cfg)
        rng = _rng(ctx, 8)
        Q = np.eye(3) + 0.6 * rng.standard_normal((3, 3))
        Qinv = np.linalg.inv(Q)
        Ws2 = Ws[:-1] + [Q @ Ws[-1]]
        hs1, gb1, loss1 = S.forward_backward(Ws, X, Y)
        hs2, gb2, loss2 = S.forward_backward(Ws2, X, Y, loss_matrix=Qinv)
        idx = range(cfg.n_layers - 1) if layers == "hidden" else range(cfg.n_layers)
        diffs, values = {}, {}
        for l in idx:
            r1 = S.alignment_report(Ws[l], hs1[l], gb1[l], null_draws=0)
            r2 = S.alignment_report(Ws2[l], hs2[l], gb2[l], null_draws=0)
            for rel in invariant:
                if rel == "NFA":
                    a = []
                    for W_, Wset in ((Ws[l], Ws), (Ws2[l], Ws2)):
                        J = S.input_jacobians(Wset, X, l)
                        agop = np.einsum("noi,noj->ij", J, J) / X.shape[0]
                        a.append(S.alpha_cosine(W_.T @ W_, agop))
                else:
                    a = [r1.alignments[rel]["cosine"], r2.alignments[rel]["cosine"]]
                diffs[f"layer {l + 1} {rel}"] = abs(a[1] - a[0])
                values[f"layer {l + 1} {rel}"] = a
        worst = max(diffs.values())
        yield close(f"{', '.join(invariant)} unchanged ({layers} layers)", 0.0, worst, rtol=0.0, atol=IDENTITY_RTOL,
                    what="max |change of alignment|", evidence={"before_after": values, "Q": Q})
        yield close("loss unchanged by the reparametrisation", float(loss1), float(loss2), rtol=IDENTITY_RTOL,
                    what="loss")

    return _claim(id, statement or "Gradient-weight alignment (both sides) of every hidden layer is unchanged when "
                  "the output is reparametrised f' = Qf (Q invertible) with the compensating loss; the neural "
                  "feature ansatz statistic is not invariant.", f"{PAPER}, reparametrisation remark (reconstructed)",
                  Provenance.RECONSTRUCTED, check, key=("measured",))


def nfa_changes_claim(*, id="crh.reparam.nfa_changes") -> Claim:
    """Companion measurement: the NFA statistic alpha_cos(W^T W, AGOP) does change under f' = Qf."""

    def check(ctx):
        res = list(reparam_claim(("NFA",)).check(ctx))
        c = res[0]
        change = c.evidence.get("measured")
        ok = change is not None and change > 1e-3
        yield condition("NFA statistic changes under f' = Qf", ok,
                        verified=f"max |change| {fmt(change, 3)} > 1e-3",
                        refuted=f"max |change| only {fmt(change, 3)}", evidence=c.evidence, inconclusive=True)

    return _claim(id, "The neural-feature-ansatz statistic alpha_cos(W^T W, E[J^T J]) of hidden layers changes "
                  "under the output reparametrisation f' = Qf (non-orthogonal Q) with the compensating loss.",
                  f"{PAPER}, reparametrisation remark (reconstructed)", Provenance.RECONSTRUCTED, check,
                  key=("measured",))


# --------------------------------------------------------------------------------------------
# The MLP experiment: measured hypotheses (reconstructed)
# --------------------------------------------------------------------------------------------

#: `ncproofs run` quick profile: gamma in {0, 1e-2}, 2e4 steps (gamma * eta * steps = 10), ~5-10 s.
EXP_QUICK = T.CRHExperiment(weight_decays=(0.0, 1e-2), steps=20_000, n_records=50)
#: Full profile: the spec's experiment (2e5 steps, average over the second half).
EXP_FULL = T.CRHExperiment(weight_decays=(0.0, 1e-3, 1e-2), steps=200_000, n_records=200)


@functools.lru_cache(maxsize=4)
def experiment(cfg: T.CRHExperiment) -> S.ExperimentResult:
    return S.run_experiment(cfg)


@functools.lru_cache(maxsize=32)
def experiment_report(cfg: T.CRHExperiment, run: int, layer: int, mode: str = "normalized",
                      null_draws: int = S.NULL_DRAWS) -> S.AlignmentReport:
    res = experiment(cfg)
    return S.report_from_matrices(res.layer(run, layer, mode), null_draws=null_draws, seed=cfg.seed + 97 * run + layer,
                                  keep_matrices=False)


def _cfg(ctx, cfg):
    if cfg is not None:
        return cfg
    return EXP_FULL if ctx.full else EXP_QUICK


def _run_index(cfg, gamma) -> int:
    for i, g in enumerate(cfg.weight_decays):
        if abs(g - gamma) <= 1e-12 * max(1.0, abs(gamma)):
            return i
    raise ValueError(f"weight decay {gamma} is not among the experiment's weight_decays {cfg.weight_decays}")


def _layer_index(cfg, layer: int) -> int:
    return layer % cfg.n_layers


def _alignments(rep, metric="pearson"):
    return {r: rep.alignments[r][metric] for r in T.RELATION_NAMES}


def alignment_wd_claim(gamma_lo: float = 0.0, gamma_hi: float = 1e-2, *, layer: int = -2, direction: str = "increases",
                       cfg: T.CRHExperiment | None = None, id="crh.experiment.alignment_vs_weight_decay",
                       statement=None) -> Claim:
    """Measured: in ``layer`` (default the last hidden layer), the six alignments at gamma_hi are
    higher ("increases") or lower ("decreases") than at gamma_lo, and above their Haar null."""

    def check(ctx):
        c = _cfg(ctx, cfg)
        res = experiment(c)
        lo, hi = _run_index(c, gamma_lo), _run_index(c, gamma_hi)
        li = _layer_index(c, layer)
        if res.diverged[lo] or res.diverged[hi]:
            yield hypothesis_fails("training", "a run diverged (non-finite weights)")
            return
        r_lo, r_hi = experiment_report(c, lo, li), experiment_report(c, hi, li)
        a_lo, a_hi = _alignments(r_lo), _alignments(r_hi)
        gains = {r: a_hi[r] - a_lo[r] for r in T.RELATION_NAMES}
        mean_gain = float(np.mean(list(gains.values())))
        sign = 1.0 if direction == "increases" else -1.0
        ev = {"layer": li + 1, "gamma_lo": gamma_lo, "gamma_hi": gamma_hi, "alignment_lo": a_lo,
              "alignment_hi": a_hi, "mean_gain": mean_gain, "steps": c.steps, "mode": "normalized, Pearson",
              "seconds": res.seconds}
        if sign * mean_gain >= MIN_GAIN:
            yield Check(f"mean alignment {direction} from gamma={fmt(gamma_lo)} to {fmt(gamma_hi)}", Verdict.VERIFIED,
                        f"mean gain {fmt(mean_gain, 3)} ({direction}, threshold {MIN_GAIN})", ev)
        elif sign * mean_gain <= -MIN_GAIN:
            yield Check(f"mean alignment {direction} from gamma={fmt(gamma_lo)} to {fmt(gamma_hi)}", Verdict.REFUTED,
                        f"measured mean gain {fmt(mean_gain, 3)} contradicts '{direction}' (margin {MIN_GAIN})", ev)
        else:
            yield Check(f"mean alignment {direction} from gamma={fmt(gamma_lo)} to {fmt(gamma_hi)}",
                        Verdict.INCONCLUSIVE, f"mean gain {fmt(mean_gain, 3)} within +-{MIN_GAIN}", ev)
        top = gamma_hi if direction == "increases" else gamma_lo
        rep_top = r_hi if direction == "increases" else r_lo
        above = {r: rep_top.alignments[r]["pearson"] - (rep_top.null[r]["pearson"].mean + NULL_Z * rep_top.null[r]["pearson"].std)
                 for r in T.RELATION_NAMES}
        yield condition(f"all six alignments at gamma={fmt(top)} above Haar null + {NULL_Z} std",
                        min(above.values()) > 0, verified=f"smallest excess {fmt(min(above.values()), 3)}",
                        refuted=f"smallest excess {fmt(min(above.values()), 3)} <= 0", inconclusive=True,
                        evidence={"excess_over_null": above,
                                  "null_mean": {r: rep_top.null[r]["pearson"].mean for r in T.RELATION_NAMES}})

    return _claim(id, statement or f"In the last hidden layer of the spec's MLP experiment, the six alignments "
                  f"(per-sample-normalised centred covariances, Pearson) {direction} from weight decay "
                  f"{fmt(gamma_lo)} to {fmt(gamma_hi)} and exceed their Haar null baseline.",
                  f"{PAPER}, CRH theorem and weight-decay figure (reconstructed)", Provenance.RECONSTRUCTED, check,
                  key=("mean_gain",), tags=("experiment",))


def alignment_level_claim(gamma: float, threshold: float, *, layer: int = -2, cfg: T.CRHExperiment | None = None,
                          id=None, statement=None) -> Claim:
    """Measured level statement: all six alignments of ``layer`` at weight decay ``gamma`` are >= threshold.
    REFUTED when one is below threshold - LEVEL_MARGIN."""
    cid = id or f"crh.experiment.alignment_level.g{gamma:g}"

    def check(ctx):
        c = _cfg(ctx, cfg)
        ri, li = _run_index(c, gamma), _layer_index(c, layer)
        a = _alignments(experiment_report(c, ri, li))
        lowest = min(a.values())
        ev = {"alignments": a, "threshold": threshold, "layer": li + 1, "gamma": gamma, "steps": c.steps}
        if lowest >= threshold:
            yield Check("all six alignments >= threshold", Verdict.VERIFIED, f"lowest {fmt(lowest, 3)} >= {threshold}", ev)
        elif lowest < threshold - LEVEL_MARGIN:
            yield Check("all six alignments >= threshold", Verdict.REFUTED,
                        f"lowest alignment {fmt(lowest, 3)} < {threshold} - {LEVEL_MARGIN}", ev)
        else:
            yield Check("all six alignments >= threshold", Verdict.INCONCLUSIVE,
                        f"lowest {fmt(lowest, 3)} within {LEVEL_MARGIN} below {threshold}", ev)

    return _claim(cid, statement or f"At weight decay {fmt(gamma)} all six alignments of the last hidden layer are "
                  f">= {threshold}.", f"{PAPER}, weight-decay figure (reconstructed)", Provenance.RECONSTRUCTED,
                  check, tags=("experiment",))


def rank_claim(rank: int | None = None, gamma: float = 1e-2, *, cfg: T.CRHExperiment | None = None,
               id="crh.experiment.rank_drop", statement=None) -> Claim:
    """Measured: at weight decay gamma the hidden weight matrices (W_2 .. W_{L-1}) have numerical rank
    ``rank`` (default the task rank) at relative threshold RANK_REL_TOL; at gamma = 0 they do not."""

    def check(ctx):
        c = _cfg(ctx, cfg)
        want = c.task_rank if rank is None else rank
        res = experiment(c)
        ri = _run_index(c, gamma)
        if res.diverged[ri]:
            yield hypothesis_fails("training", f"the run with weight decay {fmt(gamma)} diverged (non-finite weights)")
            return
        ranks, ratios = {}, {}
        ambiguous = []
        for l in range(1, c.n_layers - 1):
            s = np.linalg.svd(res.W_mean[ri][l], compute_uv=False)
            rel = s / s[0]
            ranks[f"W{l + 1}"] = int(np.sum(rel > RANK_REL_TOL))
            ratios[f"W{l + 1}"] = rel[: want + 2].tolist()
            if np.any((rel > RANK_AMBIGUOUS[0]) & (rel < RANK_AMBIGUOUS[1])):
                ambiguous.append(f"W{l + 1}")
        ev = {"ranks": ranks, "relative_singular_values": ratios, "claimed_rank": want, "gamma": gamma,
              "threshold": RANK_REL_TOL}
        if all(r == want for r in ranks.values()):
            yield Check(f"numerical rank at gamma={fmt(gamma)}", Verdict.VERIFIED, f"ranks {ranks} = {want}", ev)
        elif ambiguous:
            yield Check(f"numerical rank at gamma={fmt(gamma)}", Verdict.INCONCLUSIVE,
                        f"ranks {ranks}; singular values in the ambiguous band {RANK_AMBIGUOUS} for {ambiguous}", ev)
        else:
            yield Check(f"numerical rank at gamma={fmt(gamma)}", Verdict.REFUTED, f"ranks {ranks} != {want}", ev)

    return _claim(id, statement or f"With weight decay {fmt(gamma)} the hidden weight matrices of the MLP experiment "
                  "drop to the task's dimension (numerical rank = task rank).",
                  f"{PAPER}, experiments (reconstructed)", Provenance.RECONSTRUCTED, check, key=("ranks",),
                  tags=("experiment",))


def magnitude_ratio(res: S.ExperimentResult, run: int, layer: int) -> float | None:
    """tr(G_b) / (gamma^2 tr(H_b)) from raw second moments (1 if the theorem's magnitudes held)."""
    g = res.config.weight_decays[run]
    M = res.layer(run, layer, "raw")
    den = g * g * np.trace(M.H_b)
    return None if g == 0 or den <= 0 else float(np.trace(M.G_b) / den)


def magnitude_claim(gamma: float = 1e-2, *, cfg: T.CRHExperiment | None = None, id="crh.experiment.magnitude",
                    statement=None) -> Claim:
    """Open discrepancy: the theorem's magnitudes (G_b ~ gamma^2 H_b with constant 1) are reported as the
    measured ratio, always INCONCLUSIVE (never VERIFIED, never REFUTED: the statement's exact form
    could not be reconstructed)."""

    def check(ctx):
        c = _cfg(ctx, cfg)
        res = experiment(c)
        ri = _run_index(c, gamma)
        if res.diverged[ri]:
            yield hypothesis_fails("training", f"the run with weight decay {fmt(gamma)} diverged (non-finite weights)")
            return
        ratios = {f"layer {l + 1}": magnitude_ratio(res, ri, l) for l in range(c.n_layers)}
        hz = {}
        for l in range(c.n_layers):
            M = res.layer(ri, l, "raw")
            hz[f"layer {l + 1}"] = float(np.trace(M.H_b) / np.trace(M.Z_b)) if np.trace(M.Z_b) > 0 else None
        stat = {f"layer {l + 1}": res.stationarity_residual(ri, l) for l in range(c.n_layers)}
        li = _layer_index(c, -2)
        ev = {"ratio_trG_b_over_gamma2_trH_b": ratios, "ratio_trH_b_over_trZ_b": hz, "stationarity_residual": stat,
              "gamma": gamma, "last_hidden_ratio": ratios[f"layer {li + 1}"]}
        r = ratios[f"layer {li + 1}"]
        if r is None:
            yield hypothesis_fails("magnitude ratio", "gamma = 0: the ratio is undefined", ev)
            return
        yield Check("magnitude: tr(G_b) / (gamma^2 tr(H_b))", Verdict.INCONCLUSIVE,
                    f"open discrepancy: measured ratio {fmt(r, 4)} in the last hidden layer (theorem as reconstructed "
                    f"predicts 1; spec reports 70 to 3.5e5)", ev)

    return _claim(id, statement or "Magnitude part of the CRH theorem: G_b + O(gamma) ~ gamma^2 H_b ~ gamma^2 W W^T "
                  "with constant 1 (reported as the measured ratio tr(G_b)/(gamma^2 tr(H_b)); open discrepancy).",
                  f"{PAPER}, CRH theorem (reconstructed)", Provenance.RECONSTRUCTED, check,
                  key=("last_hidden_ratio",), tags=("experiment",))


def stationarity_sgd_claim(gamma: float = 1e-2, *, cfg: T.CRHExperiment | None = None,
                           id="crh.experiment.stationarity", statement=None) -> Claim:
    """Measured: time-averaged SGD weights are stationary in the mean: ||E[g_b h_a^T] - gamma W|| / ||gamma W||
    below STATIONARY_TOL in every layer (the theorem's hypothesis holds in the experiment)."""

    def check(ctx):
        c = _cfg(ctx, cfg)
        res = experiment(c)
        ri = _run_index(c, gamma)
        stat = {f"layer {l + 1}": res.stationarity_residual(ri, l) for l in range(c.n_layers)}
        vals = [v for v in stat.values() if v is not None]
        if not vals:
            yield hypothesis_fails("stationarity residual", "undefined (weight decay 0 or a diverged run)",
                                   {"residuals": stat, "gamma": gamma})
            return
        worst = max(vals)
        yield condition("stationarity residual", worst <= STATIONARY_TOL,
                        verified=f"max residual {fmt(worst, 3)} <= {STATIONARY_TOL}",
                        refuted=f"max residual {fmt(worst, 3)} > {STATIONARY_TOL}: weights not stationary "
                                "(hypothesis of the theorem fails)", inconclusive=True,
                        evidence={"residuals": stat, "max_residual": worst, "gamma": gamma, "steps": c.steps})

    return _claim(id, statement or f"With weight decay {fmt(gamma)}, SGD in the MLP experiment reaches mean "
                  "stationarity: the time-averaged E[g_b h_a^T] equals gamma W within 25% in every layer.",
                  f"{PAPER}, stationarity hypothesis of the CRH theorem (reconstructed)", Provenance.RECONSTRUCTED,
                  check, key=("max_residual",), tags=("experiment",))


CLAIMS: list[Claim] = [
    backprop_claim(),
    transfer_claim(),
    scaled_projector_claim(),
    isotropy_claim(),
    one_step_claim(),
    stationarity_claim(),
    balance_claim(),
    exponent_table_claim(),
    nc_claim(),
    nc_breaking_claim(),
    reparam_claim(),
    nfa_changes_claim(),
    alignment_wd_claim(),
    alignment_level_claim(1e-2, 0.8, id="crh.experiment.alignment_level",
                          statement="At weight decay 1e-2 all six alignments of the last hidden layer are >= 0.8 "
                                    "(spec: about 0.86-0.99 with 2e5 steps)."),
    rank_claim(),
    stationarity_sgd_claim(),
    magnitude_claim(),
]
