"""Run claims of the UFM with any loss, any class sizes and regression (docs/ufm_general.md).

Each claim runs :func:`proofs_check.claims.ufm.check_general` / ``check_regression`` (the verdict engine of
``ncproofs solve ufm`` and ``solve ufm-regression``) on a few instances and keeps the statements it is about.
The predictions are parameters of the factories, so a test can feed a false formula and see it refuted.
Under ``run --rigorous`` the value statements are judged in ball arithmetic (docs/rigorous.md).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from proofs_check.core import Check, Claim, Provenance, RunContext, close
from proofs_check.rigorous import judge_report

FAMILY = "ufm_general"
SOURCE = "docs/ufm_general.md (derived: Fenchel dual of the nuclear-norm reformulation)"
REGRESSION_SOURCE = "Andriopoulos et al. 2024 (neural regression collapse); docs/ufm_general.md, Regression"
#: docs/ufm_general.md reference: label smoothing (PyTorch convention, eps = 0.1), (k, n, d, lw, lh) =
#: (4, 3, 4, 5e-3, 5e-3), computed independently (convex and factored solves agree to 1e-12); 8 digits given.
LS_REFERENCE = ((4, 3, 4, 5e-3, 5e-3, 0.1, "torch"), 0.43817131)
LS_REFERENCE_ATOL = 5e-9  # half a unit in the 8th decimal of the reference


def label_smoothing_value(k: int, n: int, lw: float, lh: float, eps: float, convention: str = "torch") -> float:
    """Balanced label-smoothed CE UFM optimum (d >= k - 1, bias free): by symmetry and convexity the logits are
    c J_k per class, g(c) = log(1 + (k-1) e^-c) + c (1 - q_y) + (k-1) s c with s = sqrt(n lw lh) and q_y the
    smoothed target of the true class; with a = (1 - q_y) + (k - 1) s: c* = log((1 - a)(k - 1)/a) and
    f* = -log(1 - a) + a c* when a < (k - 1)/k, else f* = log k at Z = 0 (derived; docs/ufm_general.md)."""
    q_y = 1.0 - eps + eps / k if convention == "torch" else 1.0 - eps
    a = (1.0 - q_y) + (k - 1) * math.sqrt(n * lw * lh)
    if a >= (k - 1) / k:
        return math.log(k)
    c = math.log((1.0 - a) * (k - 1) / a)
    return -math.log1p(-a) + a * c


def regression_value(Y: np.ndarray, lw: float, lh: float) -> float:
    """Regression UFM optimum (Andriopoulos et al. 2024; docs/ufm_general.md): with the singular values s_j of the
    centred targets and lam = sqrt(lw lh), (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0)."""
    Y = np.asarray(Y, dtype=float)
    N = Y.shape[0]
    s = np.linalg.svd(Y - Y.mean(axis=0), compute_uv=False)
    lam = math.sqrt(lw * lh)
    return float(np.sum(np.minimum(s, N * lam) ** 2) / (2 * N) + lam * np.sum(np.maximum(s - N * lam, 0.0)))


def _ls_instances(ctx: RunContext):
    rows = [(4, 3, 4, 5e-3, 5e-3, 0.1, "torch"), (5, 2, 4, 1e-3, 1e-2, 0.3, "torch"),
            (3, 4, 3, 2e-3, 2e-3, 0.2, "others"), (4, 3, 4, 0.2, 0.2, 0.1, "torch")]  # the last: Z = 0 phase
    if ctx.full:
        rows += [(10, 5, 10, 1e-4, 1e-3, 0.05, "others"), (2, 1, 1, 1e-2, 1e-2, 0.5, "torch")]
    return rows


def _ls_problem(k, n, d, lw, lh, eps, conv):
    from solvers import losses as L
    from solvers import ufm_general as SG

    return SG.classification(L.make_loss("ls", k, smoothing=eps, convention=conv), [n] * k, d, lw, lh)


def _tag(k, n, d, lw, lh, eps, conv) -> str:
    return f"k={k} n={n} d={d} lw={lw:g} lh={lh:g} eps={eps:g} ({conv})"


def make_ls_value_claim(predict: Callable[..., float] = label_smoothing_value,
                        claim_id: str = "ufm_general.label-smoothing.optimal-value") -> Claim:
    """The balanced label-smoothing optimum equals ``predict(k, n, lw, lh, eps, convention)``: checked against the
    certified optimum (dual bound of the conjugate at the solver's candidate) and the reference value."""
    from proofs_check.claims.ufm import check_general

    def check(ctx: RunContext):
        (args, ref) = LS_REFERENCE
        k, n, d, lw, lh, eps, conv = args
        yield close(f"reference [{_tag(*args)}]", ref, predict(k, n, lw, lh, eps, conv), rtol=0,
                    atol=LS_REFERENCE_ATOL, what="optimal value")
        for row in _ls_instances(ctx):
            k, n, d, lw, lh, eps, conv = row
            rep = judge_report(check_general(_ls_problem(*row), starts=1, seed=ctx.seed,
                                             claimed_value=predict(k, n, lw, lh, eps, conv), minority_threshold=None),
                               ctx)
            c = next(ch for ch in rep.claims if ch.name == "optimal-value")
            yield Check(f"{_tag(*row)}: optimal-value", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Balanced UFM with label-smoothed cross-entropy (target q_y = 1 - eps + eps/k, PyTorch convention, or "
                 "1 - eps, the other convention), weight decay and a free bias, d >= k - 1: the optimum is "
                 "-log(1 - a) + a log((1 - a)(k - 1)/a) with a = (1 - q_y) + (k - 1) sqrt(n lw lh) when a < (k - 1)/k, "
                 "else log k.", SOURCE, Provenance.DERIVED, check, key=("predicted", "lower_bound", "gap"),
                 tags=("any-loss", "certified"))


def make_ls_geometry_claim(claim_id: str = "ufm_general.label-smoothing.collapse-etf") -> Claim:
    """Every minimiser of the balanced LS UFM in the collapse phase has simplex-ETF class means: decided at the
    closed form, proven the unique minimiser by a strictly complementary certificate (check_general)."""
    from proofs_check.claims.ufm import check_general

    def check(ctx: RunContext):
        for row in _ls_instances(ctx)[:3]:
            rep = judge_report(check_general(_ls_problem(*row), starts=1, seed=ctx.seed, minority_threshold=None), ctx)
            for c in rep.claims:
                if c.name in ("minimiser-unique",) or c.name.startswith("geometry-"):
                    yield Check(f"{_tag(*row)}: {c.name}", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Balanced UFM with label smoothing, d >= k - 1, collapse phase: the minimiser is unique (up to "
                 "rotations) and its class means form a simplex ETF.",
                 "docs/ufm_general.md (reference: label smoothing keeps the simplex ETF)", Provenance.RECONSTRUCTED,
                 check, key=("delta",), tags=("any-loss", "geometry"))


def _regression_targets(ctx: RunContext):
    rng = np.random.default_rng(1000 + ctx.seed)
    out = [(rng.normal(size=(12, 3)), 3, 1e-2, 2e-2),
           (rng.normal(size=(20, 4)) @ np.diag([3.0, 1.0, 0.1, 0.01]), 4, 1e-2, 1e-2),  # some directions thresholded
           (np.repeat(rng.normal(size=(1, 2)), 5, axis=0), 2, 1e-3, 1e-3)]  # constant targets: optimum 0
    if ctx.full:
        out += [(rng.normal(size=(60, 8)), 8, 1e-4, 1e-4), (rng.normal(size=(7, 5)), 2, 1e-1, 1e-3)]
    return out


def make_regression_value_claim(predict: Callable[[np.ndarray, float, float], float] = regression_value,
                                claim_id: str = "ufm_general.regression.optimal-value") -> Claim:
    """The regression UFM optimum is ``predict(Y, lw, lh)`` (soft thresholding of the centred targets)."""
    from proofs_check.claims.ufm import check_regression

    def check(ctx: RunContext):
        for Y, d, lw, lh in _regression_targets(ctx):
            tag = f"N={Y.shape[0]} m={Y.shape[1]} d={d} lw={lw:g} lh={lh:g}"
            rep = judge_report(check_regression(Y, d, lw, lh, claimed_value=predict(Y, lw, lh), seed=ctx.seed), ctx)
            for c in rep.claims:
                if c.name == "optimal-value":
                    yield Check(f"{tag}: optimal-value", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Regression UFM (targets Y, N x m; squared error, weight decay, free bias), d >= the rank of the "
                 "optimum: the optimal value is (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0), s_j "
                 "the singular values of the centred targets, lam = sqrt(lw lh).",
                 REGRESSION_SOURCE, Provenance.RECONSTRUCTED, check, key=("predicted", "lower_bound", "gap"),
                 tags=("regression", "certified"))


def imbalanced_mse_value(counts, lw: float, lh: float) -> float:
    """Imbalanced MSE UFM optimum (one-hot targets, free bias, d >= its rank; docs/ufm_general.md, "Imbalanced MSE in
    closed form"): the regression closed form of the centred one-hot targets, i.e. with the singular values s_j of
    D^{1/2} (I - sqrt(n) sqrt(n)^T / N), (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0).
    Computed here from the sample-level one-hot matrix (N x K), not from the class-reduced one."""
    counts = np.asarray(counts, dtype=int)
    y = np.repeat(np.arange(counts.size), counts)
    Y = np.zeros((y.size, counts.size))
    Y[np.arange(y.size), y] = 1.0
    return regression_value(Y, lw, lh)


def _imbalanced_rows(ctx: RunContext):
    rows = [("ce", {}, (6, 6, 2, 1), 4, 5e-3, 5e-3), ("mse", {}, (5, 2, 1), 3, 5e-3, 5e-3),
            ("ce", {}, (10, 10, 1, 1), 4, 5e-3, 5e-3), ("ls", {"smoothing": 0.1}, (6, 6, 2, 1), 4, 5e-3, 5e-3)]
    if ctx.full:
        rows += [("weighted-ce", {"weights": [1.0, 1.0, 2.0, 3.0]}, (6, 6, 2, 1), 4, 5e-3, 1e-2),
                 ("ls", {"smoothing": 0.2, "convention": "others"}, (5, 3, 1), 3, 5e-3, 5e-3),
                 ("ce", {}, (6, 6, 2, 1), 3, 5e-3, 5e-3)]  # d = K - 1: the structural rank bound decides
    return rows


def _imb_problem(name, kw, counts, d, lw, lh):
    from solvers import losses as L
    from solvers import ufm_general as SG

    return SG.classification(L.make_loss(name, len(counts), **kw), list(counts), d, lw, lh)


def make_imbalanced_geometry_claim(expected: Callable | None = None,
                                   claim_id: str = "ufm_general.imbalanced.minimiser-geometry") -> Claim:
    """Imbalanced UFM (CE, label smoothing, weighted CE, MSE; free bias; d >= the proven rank bound): the minimiser
    is unique in (Z, centred bias), and its class-mean cosines and minority measures (Fang et al.'s minority
    collapse: cosine between the smallest-count classes' classifiers, norm ratios) are proven to within 1e-4 at every
    minimiser (docs/ufm_general.md, "Geometry certificate"). ``expected(counts, loss name) -> dict | None`` states
    values (keys of ``check_general(geometry_expected=)``); None: the reported values. A false expectation (e.g. the
    balanced simplex-ETF cosines) is REFUTED by the proven intervals."""
    from proofs_check.claims.ufm import check_general

    def check(ctx: RunContext):
        for name, kw, counts, d, lw, lh in _imbalanced_rows(ctx):
            exp = expected(counts, name) if expected is not None else None
            rep = judge_report(check_general(_imb_problem(name, kw, counts, d, lw, lh), starts=1, seed=ctx.seed,
                                             geometry_expected=exp, minority_threshold=None), ctx)
            tag = f"{name} counts={','.join(map(str, counts))} d={d} lw={lw:g} lh={lh:g}"
            for c in rep.claims:
                if c.name in ("minimiser-unique", "minority-geometry", "class-mean-cosines"):
                    yield Check(f"{tag}: {c.name}", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Imbalanced UFM with CE, label smoothing, weighted CE or MSE, free bias, d >= the proven rank bound: "
                 "the minimiser is unique (up to rotations of feature space) and its class-mean cosines and minority "
                 "measures are determined to 1e-4 by a proven radius around the certified dual point.",
                 "docs/ufm_general.md, 'Geometry certificate' (derived); statements of Fang et al., PNAS 2021 and "
                 "Hong & Ling 2023 as measured quantities", Provenance.DERIVED, check, key=("radius", "halfwidth"),
                 tags=("any-loss", "geometry"))


def make_imbalanced_mse_value_claim(predict: Callable = imbalanced_mse_value,
                                    claim_id: str = "ufm_general.imbalanced-mse.optimal-value") -> Claim:
    """The imbalanced MSE UFM optimum equals ``predict(counts, lw, lh)`` (closed form by soft thresholding),
    checked against the certified bracket at any K (here up to K = 300 in the full profile)."""
    from proofs_check.claims.ufm import check_general

    def check(ctx: RunContext):
        rows = [((5, 2, 1), 5e-3, 5e-3), ((6, 6, 2, 1), 5e-3, 1e-2), ((9, 4, 4, 1, 1), 1e-3, 1e-3)]
        if ctx.full:
            rows.append((tuple(max(1, 60 - c // 5) for c in range(300)), 1e-4, 1e-4))
        for counts, lw, lh in rows:
            rep = judge_report(check_general(_imb_problem("mse", {}, counts, len(counts), lw, lh), starts=1,
                                             seed=ctx.seed, claimed_value=predict(counts, lw, lh),
                                             minority_threshold=None), ctx)
            c = next(ch for ch in rep.claims if ch.name == "optimal-value")
            tag = f"K={len(counts)} counts={','.join(map(str, counts[:6]))}{'...' if len(counts) > 6 else ''}"
            yield Check(f"{tag} lw={lw:g} lh={lh:g}: optimal-value", c.verdict, c.reason, c.evidence, c.independent,
                        c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Imbalanced MSE UFM (one-hot targets, free bias, d >= the rank of the optimum): the optimum is "
                 "(1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0), s_j the singular values of the "
                 "centred one-hot label matrix, lam = sqrt(lw lh).", SOURCE, Provenance.DERIVED, check,
                 key=("predicted", "lower_bound", "gap"), tags=("any-loss", "certified"))


CLAIMS = [make_ls_value_claim(), make_ls_geometry_claim(), make_regression_value_claim(),
          make_imbalanced_geometry_claim(), make_imbalanced_mse_value_claim()]
