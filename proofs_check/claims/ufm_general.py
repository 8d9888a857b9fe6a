"""The UFM with any loss, any class sizes and regression (docs/ufm_general.md): the per-instance checks of
``ncproofs solve ufm`` and ``solve ufm-regression`` and the family's claims.

:func:`check_general` asks the engine (``solvers.ufm_general.solve``: one call) for the candidate, its certificate,
the evidence about the minimiser and the routes it tried, then states the statements and judges them with the
builders of :mod:`proofs_check.core` (typed statements, :mod:`proofs_check.statements`). :func:`check_regression`
does the same for regression targets, :func:`certify_value` gives one certified value (rows of ``table ufm``).
Each claim runs them on a few instances and keeps the statements it is about; the predictions are parameters of
the factories, so a test can feed a false formula and see it refuted. Under ``run --rigorous`` the value
statements are judged in ball arithmetic (docs/rigorous.md).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, SolveReport, Verdict, at_certified_point, close,
                               exceeds, fmt, geometry_is, hypothesis_fails, is_finite, optimum_matches, point_statement,
                               tolerance, within)
from proofs_check.rigorous import judge_report
from proofs_check.statements import EveryMinimiser
from solvers import ufm_general as SG
from theory import geometry as G
from theory import ufm as T
from theory._validate import InputError, as_float, as_int

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
    return SG.classification(L.make_loss("ls", k, smoothing=eps, convention=conv), [n] * k, d, lw, lh)


def _tag(k, n, d, lw, lh, eps, conv) -> str:
    return f"k={k} n={n} d={d} lw={lw:g} lh={lh:g} eps={eps:g} ({conv})"


def make_ls_value_claim(predict: Callable[..., float] = label_smoothing_value,
                        claim_id: str = "ufm_general.label-smoothing.optimal-value") -> Claim:
    """The balanced label-smoothing optimum equals ``predict(k, n, lw, lh, eps, convention)``: checked against the
    certified optimum (dual bound of the conjugate at the solver's candidate) and the reference value."""
    def check(ctx: RunContext):
        (args, ref) = LS_REFERENCE
        k, n, d, lw, lh, eps, conv = args
        yield close(f"reference [{_tag(*args)}]", ref, predict(k, n, lw, lh, eps, conv), rtol=0,
                    atol=LS_REFERENCE_ATOL, what="optimal value")
        for row in _ls_instances(ctx):
            k, n, d, lw, lh, eps, conv = row
            pred = predict(k, n, lw, lh, eps, conv)
            if not is_finite(pred):
                yield _not_a_number(f"{_tag(*row)}: optimal-value", pred)
                continue
            rep = judge_report(check_general(_ls_problem(*row), starts=1, seed=ctx.seed,
                                             claimed_value=pred, minority_threshold=None), ctx)
            c = next(ch for ch in rep.claims if ch.name == "optimal-value")
            yield Check(f"{_tag(*row)}: optimal-value", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Balanced UFM with label-smoothed cross-entropy (target q_y = 1 - eps + eps/k, PyTorch convention, or "
                 "1 - eps, the other convention), weight decay and a free bias, d >= k - 1: the optimum is "
                 "-log(1 - a) + a log((1 - a)(k - 1)/a) with a = (1 - q_y) + (k - 1) sqrt(n lw lh) when a < (k - 1)/k, "
                 "else log k.", SOURCE, Provenance.DERIVED, check, key=("predicted", "lower_bound", "gap"),
                 tags=("any-loss", "certified"))


def _not_a_number(name: str, predicted) -> Check:
    """A prediction that is not a finite number is never judged (never VERIFIED, never a witness)."""
    return Check(name, Verdict.INCONCLUSIVE, f"the predicted value {predicted!r} is not a finite number",
                 {"predicted": None})


def make_ls_geometry_claim(claim_id: str = "ufm_general.label-smoothing.collapse-etf",
                           geometry: str = "simplex-etf") -> Claim:
    """Every minimiser of the balanced LS UFM in the collapse phase has ``geometry`` class means (default simplex
    ETF): decided at the closed form, proven the unique minimiser by a strictly complementary certificate
    (check_general); another class name is REFUTED there."""
    def check(ctx: RunContext):
        for row in _ls_instances(ctx)[:3]:
            rep = judge_report(check_general(_ls_problem(*row), starts=1, seed=ctx.seed, minority_threshold=None,
                                             expected_geometry=geometry), ctx)
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
    def check(ctx: RunContext):
        for Y, d, lw, lh in _regression_targets(ctx):
            tag = f"N={Y.shape[0]} m={Y.shape[1]} d={d} lw={lw:g} lh={lh:g}"
            pred = predict(Y, lw, lh)
            if not is_finite(pred):
                yield _not_a_number(f"{tag}: optimal-value", pred)
                continue
            rep = judge_report(check_regression(Y, d, lw, lh, claimed_value=pred, seed=ctx.seed), ctx)
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
    return SG.classification(L.make_loss(name, len(counts), **kw), list(counts), d, lw, lh)


def _non_finite_expectation(exp):
    """(key, value) of the first expected geometry value that is not a finite number, or None."""
    if not isinstance(exp, dict):
        return None
    for key, v in exp.items():
        try:
            a = np.asarray(v, dtype=float)
        except (TypeError, ValueError):
            return key, v
        if not np.all(np.isfinite(a)):
            return key, v
    return None


def make_imbalanced_geometry_claim(expected: Callable | None = None,
                                   claim_id: str = "ufm_general.imbalanced.minimiser-geometry") -> Claim:
    """Imbalanced UFM (CE, label smoothing, weighted CE, MSE; free bias; d >= the proven rank bound): the minimiser
    is unique in (Z, centred bias), and its class-mean cosines and minority measures (Fang et al.'s minority
    collapse: cosine between the smallest-count classes' classifiers, norm ratios) are proven to within 1e-4 at every
    minimiser (docs/ufm_general.md, "Geometry certificate"). ``expected(counts, loss name) -> dict | None`` states
    values (keys of ``check_general(geometry_expected=)``); None: the reported values. A false expectation (e.g. the
    balanced simplex-ETF cosines) is REFUTED by the proven intervals."""
    def check(ctx: RunContext):
        for name, kw, counts, d, lw, lh in _imbalanced_rows(ctx):
            exp = expected(counts, name) if expected is not None else None
            tag = f"{name} counts={','.join(map(str, counts))} d={d} lw={lw:g} lh={lh:g}"
            bad = _non_finite_expectation(exp)
            if bad is not None:  # a prediction that is not a number is never judged (check_general refuses it)
                yield _not_a_number(f"{tag}: geometry expected[{bad[0]!r}]", bad[1])
                continue
            rep = judge_report(check_general(_imb_problem(name, kw, counts, d, lw, lh), starts=1, seed=ctx.seed,
                                             geometry_expected=exp, minority_threshold=None), ctx)
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
    def check(ctx: RunContext):
        rows = [((5, 2, 1), 5e-3, 5e-3), ((6, 6, 2, 1), 5e-3, 1e-2), ((9, 4, 4, 1, 1), 1e-3, 1e-3)]
        if ctx.full:
            rows.append((tuple(max(1, 60 - c // 5) for c in range(300)), 1e-4, 1e-4))
        for counts, lw, lh in rows:
            tag = f"K={len(counts)} counts={','.join(map(str, counts[:6]))}{'...' if len(counts) > 6 else ''}"
            pred = predict(counts, lw, lh)
            if not is_finite(pred):
                yield _not_a_number(f"{tag} lw={lw:g} lh={lh:g}: optimal-value", pred)
                continue
            rep = judge_report(check_general(_imb_problem("mse", {}, counts, len(counts), lw, lh), starts=1,
                                             seed=ctx.seed, claimed_value=pred, minority_threshold=None), ctx)
            c = next(ch for ch in rep.claims if ch.name == "optimal-value")
            yield Check(f"{tag} lw={lw:g} lh={lh:g}: optimal-value", c.verdict, c.reason, c.evidence, c.independent,
                        c.rigorous)

    return Claim(claim_id, FAMILY,
                 "Imbalanced MSE UFM (one-hot targets, free bias, d >= the rank of the optimum): the optimum is "
                 "(1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0), s_j the singular values of the "
                 "centred one-hot label matrix, lam = sqrt(lw lh).", SOURCE, Provenance.DERIVED, check,
                 key=("predicted", "lower_bound", "gap"), tags=("any-loss", "certified"))


CLAIMS = [make_ls_value_claim(), make_ls_geometry_claim(), make_regression_value_claim(),
          make_imbalanced_geometry_claim(), make_imbalanced_mse_value_claim()]


# =====================================================================================================
# The per-instance checks of `ncproofs solve ufm|ufm-regression` (the engine: solvers.ufm_general.solve)
# =====================================================================================================

#: Relative value tolerance of the general engine. Measured: certificate gaps of the class-reduced L-BFGS
#: candidate are 1e-12..2e-10 relative (CE, LS both conventions, weighted CE, MSE; balanced and imbalanced,
#: k <= 10); independent cvxpy solves agree with the certified values to ~1e-13. A 1e-6 relative error in a
#: claimed value is 100 times larger and is refuted.
GEN_VALUE_RTOL = 1e-8
GEN_VALUE_ATOL = 1e-30
#: The phase band of the balanced closed forms (the ufm-ce/ufm-mse band, same tolerance; the engine decides it).
PHASE_RTOL = SG.PHASE_RTOL
HOW_GENERAL_UNIQUE = SG.HOW_GENERAL_UNIQUE
HOW_GEOMETRY_CERTIFICATE = SG.HOW_GEOMETRY_CERTIFICATE
GENERAL_SOURCE = "docs/ufm_general.md (derived: Fenchel dual of the nuclear-norm reformulation)"
#: Geometry statements (docs/ufm_general.md, "Geometry certificate"): a cosine or a norm ratio "equals c" when
#: the proven interval of its value at every minimiser lies within c +- GEOMETRY_TOL (absolute; cosines and ratios
#: are O(1)). The hidden references quote class-mean cosines to 1e-4.
GEOMETRY_TOL = 1e-4
GEOMETRY_SOURCE = ("derived in this project (docs/ufm_general.md, 'Geometry certificate'); the statements are those of "
                   "Fang et al., PNAS 2021 (minority collapse) and Hong & Ling 2023 (imbalanced geometry), as measured "
                   "quantities")
#: The balanced closed forms' hypotheses, decided by the engine (re-exported for callers of this module).
closed_form_hypotheses = SG.closed_form_hypotheses


def check_general(p: "SG.GeneralUFM", *, starts: int = 2, seed: int = 0, claimed_value: float | None = None,
                  time_budget: float | None = None, minority_threshold: float | None = 1.0,
                  geometry_expected: dict | None = None, expected_geometry: str | None = None) -> SolveReport:
    """One instance of the general UFM (any loss object, any counts; docs/ufm_general.md): the engine
    (``solvers.ufm_general.solve``, one call) finds the candidate, its certificate and the evidence about the
    minimiser; this function states the statements and judges them.

    Statements: ``optimal-value`` (the closed form where the loss has one for balanced classes or imbalanced MSE,
    else the certified value; ``claimed_value`` replaces the prediction: REFUTED by the certified bracket when
    false), ``closed-form`` (NOT_APPLICABLE outside the closed form's hypotheses), ``minority-collapse-threshold``
    (``minority_threshold``; None: not stated), ``minimiser-unique`` (strictly complementary closed form,
    structural uniqueness, or the geometry certificate's proven radius with rank <= d), ``minority-geometry`` and
    ``class-mean-cosines`` (proven intervals; ``geometry_expected`` states values, REFUTED when every minimiser
    misses them), ``geometry-*`` (balanced: at the proven unique minimiser only; ``expected_geometry`` replaces the
    predicted class name, e.g. "orthogonal-frame", REFUTED at a proven unique minimiser of another class); d below
    the rank of the relaxation's optimum: ``relaxation-tight`` / ``rank-d-value`` and ``claimed-value``."""
    t0 = time.perf_counter()
    # starts 0 / True / -1 ran, nan and None were TypeErrors naming nothing; a claimed value '3' was compared
    starts, seed = as_int("starts", starts, minimum=1), as_int("seed", seed, minimum=0)
    claimed_value = None if claimed_value is None else as_float("claimed_value", claimed_value)
    minority_threshold, geometry_expected, expected_geometry = _statement_options(
        p, minority_threshold, geometry_expected, expected_geometry)
    s = SG.solve(p, starts=starts, seed=seed, time_budget=time_budget, minority=minority_threshold is not None,
                 value_rtol=GEN_VALUE_RTOL, geometry_tol=GEOMETRY_TOL, minority_dev_rtol=MINORITY_DEV_RTOL)
    if not s.tight:
        return _below_rank_report(s, claimed_value, t0)
    predicted = _general_prediction(s)
    claims = _value_statements(s, claimed_value, minority_threshold)
    claims += _uniqueness_statements(s, geometry_expected)
    claims += _geometry_statements(s, predicted, claims, expected_geometry)
    geometry = {**s.geometry, "geometry_certificate": s.geometry_how or "none (measured at the certified candidate)"}
    solution = {"value": s.certificate.upper, "method": s.run.method, "converged": s.run.converged, "rank": s.rank,
                "seconds": s.run.seconds, "start_values": s.run.diagnostics.get("start_values")}
    return SolveReport("ufm", p.to_dict(), predicted, solution, s.certificate.to_dict(), geometry, claims,
                       s.routes, s.diagnostics, seconds=time.perf_counter() - t0, live=s.live)


#: the measures ``check_general(geometry_expected=)`` states (keys of :func:`_geometry_certificate_claims`)
GEOMETRY_EXPECTED_KEYS = ("minority_classifier_cosine", "minority_mean_cosine", "classifier_norm_ratio",
                          "mean_norm_ratio", "class_mean_cosines")


def _statement_options(p, minority_threshold, geometry_expected, expected_geometry):
    """The statements a caller of :func:`check_general` gives, checked before any work (InputError naming the
    parameter). Without this a NaN or negative ``minority_threshold`` VERIFIED "theta = 14.3 > nan", a misspelt
    ``geometry_expected`` key (``class_mean_cosine``) was ignored, so the statement it meant was never judged and the
    reported values were VERIFIED instead, and ``expected_geometry="foo"`` was REFUTED as if it were a geometry."""
    if not isinstance(p, SG.GeneralUFM):
        raise InputError(f"p must be a GeneralUFM instance (solvers.ufm_general.classification(...)), got "
                         f"{type(p).__name__}")
    if minority_threshold is not None:
        minority_threshold = as_float("minority_threshold", minority_threshold, positive=True)
    if expected_geometry is not None and (not isinstance(expected_geometry, str)
                                          or expected_geometry not in G.GEOMETRY_CLASSES):
        raise InputError(f"expected_geometry must be one of {', '.join(G.GEOMETRY_CLASSES)} or None, got "
                         f"{expected_geometry!r}")
    if geometry_expected is None:
        return minority_threshold, None, expected_geometry
    if not isinstance(geometry_expected, dict):
        raise InputError(f"geometry_expected must be a dict {{measure: value}} (measures: "
                         f"{', '.join(GEOMETRY_EXPECTED_KEYS)}), got {type(geometry_expected).__name__}")
    out = {}
    for key, v in geometry_expected.items():
        if key not in GEOMETRY_EXPECTED_KEYS:
            raise InputError(f"geometry_expected: unknown measure {key!r} (one of {', '.join(GEOMETRY_EXPECTED_KEYS)})")
        if key == "class_mean_cosines":
            from theory._validate import as_finite_array

            out[key] = as_finite_array("geometry_expected['class_mean_cosines']", v, shape=(p.K, p.K))
        else:
            out[key] = as_float(f"geometry_expected[{key!r}]", v)
    return minority_threshold, out, expected_geometry


def _general_prediction(s: "SG.GeneralSolution") -> dict:
    """What the package predicts for the instance: a balanced closed form, the imbalanced-MSE closed form, or
    nothing (the certified value is then the statement)."""
    if s.closed_form is not None:
        cf = s.closed_form
        return {"value": cf["value"], "margin": cf["margin"], "geometry": cf["geometry"], "source": GENERAL_SOURCE}
    if s.mse_closed_form is not None:
        m = s.mse_closed_form
        return {"value": m["value"], "rank": m["rank"], "threshold_N_lambda": m["threshold"],
                "source": "docs/ufm_general.md, 'Imbalanced MSE in closed form' (derived)"}
    return {"value": None}


def _value_statements(s: "SG.GeneralSolution", claimed_value, minority_threshold) -> list[Check]:
    """``optimal-value`` on the candidate's certified bracket (the one the value was certified with, before any
    polish of the geometry certificate), ``closed-form`` outside its hypotheses, the minority-collapse threshold."""
    cert, cf, mse_cf = s.value_certificate, s.closed_form, s.mse_closed_form
    attained, lower = cert.upper, cert.lower_bound
    pred = claimed_value if claimed_value is not None else (cf["value"] if cf is not None else None)
    if pred is None and mse_cf is not None:
        pred = mse_cf["value"]
        how = "closed form (imbalanced MSE: soft thresholding of D^{1/2} P, from the singular values)"
    elif pred is None:
        pred = attained
        how = "certified value (no closed form): primal feasible value and an independent dual lower bound"
    else:
        how = "claimed value" if claimed_value is not None else "closed form"
    tol = tolerance(pred, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    claims = [optimum_matches("optimal-value", pred, attained=attained, lower_bound=lower, tol=tol,
                              certificate=cert.method, evidence={"prediction": how, "bound": cert.details.get("bound")})]
    if s.closed_form_failed:
        claims.append(hypothesis_fails("closed-form", "; ".join(s.closed_form_failed),
                                       {"certified_value": attained, "lower_bound": lower}))
    if minority_threshold is not None:
        mc = judge_minority_collapse(s.problem, s.minority, threshold=minority_threshold)
        if mc is not None:
            claims.append(mc)
    return claims


def _every(check: Check, prop: str, geometry: str | None = None) -> Check:
    """``check`` labelled with the statement it makes about every minimiser (``EveryMinimiser``: what
    ``--rigorous`` dispatches on; the verdict is the claim's own, unchanged)."""
    return dataclasses.replace(check, statement=EveryMinimiser(prop, geometry))


def _unique_check(verdict: Verdict, reason: str, evidence: dict) -> Check:
    """``minimiser-unique``: "the minimiser is unique", judged by the caller (``EveryMinimiser("unique")``)."""
    return _every(Check("minimiser-unique", verdict, reason, evidence), "unique")


def _uniqueness_statements(s: "SG.GeneralSolution", geometry_expected: dict | None) -> list[Check]:
    """``minimiser-unique`` from the engine's uniqueness evidence (and, on the geometry-certificate route, the
    proven geometry statements of :func:`_geometry_certificate_claims`)."""
    p, u, cert = s.problem, s.uniqueness, s.certificate
    route = u["route"]
    if route == "structural":
        st = u["structural"]
        vtol = tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
        if st["ok"] and within(cert.gap, vtol):
            return [_unique_check(Verdict.VERIFIED,
                          f"unique in (Z, centred bias): {st['why']}; the optimum exists and is certified (gap "
                          f"{fmt(cert.gap, 3)} <= {fmt(vtol, 3)}); no radius or geometry for K = {p.K} > "
                          f"{SG.EXPAND_MAX} (no K x K matrices formed)", {**st, "certificate_gap": cert.gap})]
        return [_unique_check(Verdict.INCONCLUSIVE,
                      f"no geometry certificate for K = {p.K} > {SG.EXPAND_MAX} classes: "
                      + (st["why"] if not st["ok"] else f"the value is not certified (gap {fmt(cert.gap, 3)})"),
                      {"classes": p.K, **st})]
    if route == "phase-threshold":
        return [_unique_at_phase_threshold(s)]
    if route == "closed-form":
        return [_unique_at_closed_form(s)]
    return _geometry_certificate_claims(p, u["enclosure"], s.intervals, cert, geometry_expected, u["structural"])


def _unique_at_phase_threshold(s: "SG.GeneralSolution") -> Check:
    """``minimiser-unique`` where float64 puts lambda within PHASE_RTOL of the closed form's phase switch: VERIFIED
    when the exact rationals of the doubles put rho0 <= 1 (equality included: Z = 0 is then the unique minimiser,
    ``SG.exact_phase``; docs/ufm_general.md, "Exact phase at the threshold") and Z = 0 with b0 is certified within
    the value tolerance; INCONCLUSIVE on the collapse side (a simplex ETF of vanishing scale) or without an exact
    decision."""
    u = s.uniqueness
    ex = u.get("exact")
    ev = {"phase_rtol": u["phase_rtol"], "closed_form_phase": u["closed_form_phase"], "exact_phase": ex}
    band = (f"lambda is within {PHASE_RTOL:g} relative of the value where the closed form switches between a simplex "
            "ETF and zero, where float64 cannot tell which is the minimiser")
    if ex is not None and ex["zero_minimiser"]:
        cc = u["closed_form_certificate"]
        tol = tolerance(s.closed_form["value"], rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
        ev.update(closed_form_gap=cc.gap, tolerance=tol)
        rho = (f"rho0^2 = (w kappa)^2 / (K^2 n lw lh) = {ex['rho0_squared']} "
               + ("= 1 exactly" if ex["at_threshold"] else f"< 1 (1 - rho0^2 = {fmt(ex['one_minus_rho0_squared'], 3)})")
               + " in exact rational arithmetic (the doubles of "
               f"lw, lh, w, eps; kappa = q_true - q_other = {ex['kappa']})")
        if within(cc.gap, tol):
            return _unique_check(Verdict.VERIFIED,
                                 f"exact phase: {rho}, so Z* = 0 (bias b0 = {ex['bias_b0']}) is the unique minimiser "
                                 f"in (Z, centred bias) and Z = 0 is certified (gap {fmt(cc.gap, 3)} <= "
                                 f"{fmt(tol, 3)}); {band}, the rationals can (docs/ufm_general.md, 'Exact phase at "
                                 "the threshold')", ev)
        return _unique_check(Verdict.INCONCLUSIVE, f"exact phase: {rho}, but Z = 0 is not certified within the value "
                             f"tolerance (gap {fmt(cc.gap, 3)} > {fmt(tol, 3)})", ev)
    if ex is not None:
        return _unique_check(Verdict.INCONCLUSIVE,
                             f"at the phase threshold: {band}; exact rationals put rho0^2 = {ex['rho0_squared']} > 1 "
                             f"(1 - rho0^2 = {fmt(ex['one_minus_rho0_squared'], 3)}), "
                             "so the minimiser is a simplex ETF of vanishing scale, which float64 cannot resolve", ev)
    return _unique_check(Verdict.INCONCLUSIVE, f"at the phase threshold: {band}", ev)


def _unique_at_closed_form(s: "SG.GeneralSolution") -> Check:
    """``minimiser-unique`` at the balanced closed form: VERIFIED by a strictly complementary certificate with the
    closed form certified; else, when the engine computed it, by the geometry certificate of the closed form's dual
    point (rank <= d, radius below the centre's norm, exchangeable classes); else INCONCLUSIVE."""
    p, u, cf = s.problem, s.uniqueness, s.closed_form
    uq, cc = u["conditions"], u["closed_form_certificate"]
    ok = uq["valid"] and within(cc.gap, tolerance(cf["value"], rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL))
    check = _unique_check(Verdict.VERIFIED if ok else Verdict.INCONCLUSIVE,
                  ("the closed form is the unique minimiser (strictly complementary certificate, delta = "
                   f"{fmt(uq['delta'], 3)})") if ok else "uniqueness conditions not confirmed at the closed form",
                  {**uq, "closed_form_gap": cc.gap})
    enc = u.get("enclosure")
    if ok or enc is None:
        return check
    if enc["ok"] and enc["rank_bound"] <= p.d and u["nonzero"] and u["exchangeable"]:
        return _unique_check(Verdict.VERIFIED,
                     f"unique in (Z, centred bias): {enc['uniqueness']}; rank <= {enc['rank_bound']} <= d; "
                     f"proven radius {fmt(enc['radius'], 3)} < ||Xhat||_F = {fmt(enc['center_norm'], 3)} "
                     "(the face tolerances of the closed-form route failed at this scale: "
                     f"{', '.join(k for k, v in uq['conditions'].items() if not v)})",
                     {**{k: v for k, v in enc.items() if k != 'center'}, "closed_form_gap": cc.gap})
    return check


def _geometry_statements(s: "SG.GeneralSolution", predicted: dict, stated: list[Check],
                         expected_geometry: str | None = None) -> list[Check]:
    """``geometry-*`` (balanced classes: the class-mean Gram classified, counted only at the proven unique
    minimiser) and ``minority-geometry`` measured at the certified candidate (only when the geometry certificate
    has not stated it: ``stated``, the checks so far)."""
    p, cert = s.problem, s.certificate
    mc = s.cosines[0]
    tol = tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    out: list[Check] = []
    expected = predicted.get("geometry", "simplex-etf") if s.closed_form is not None else _decayed_bias_geometry(s)
    if expected_geometry is not None:
        expected = expected_geometry
    w = getattr(p.loss, "w", None)
    unequal = w is not None and np.size(w) > 1 and not np.all(np.asarray(w) == np.asarray(w).flat[0])
    if s.balanced and p.G == p.K and s.closed_form is None and (unequal or s.closed_form_failed):
        # the simplex ETF (or zero, by the phase of the closed form) is the package's statement for a loss
        # symmetric under permutations of the classes, inside the closed form's hypotheses; unequal class
        # weights break the symmetry (as imbalance does), and outside the hypotheses (a smoothed target that
        # prefers the other classes) the closed form decides no phase, so no geometry is stated
        if unequal:
            why = ("the simplex-ETF statement needs a loss symmetric under permutations of the classes; the class "
                   f"weights are unequal ({', '.join(f'{float(v):g}' for v in np.ravel(w))})")
            ev = {"class_weights": [float(v) for v in np.ravel(w)]}
        else:
            why = "the geometry is stated by the balanced closed form: " + "; ".join(s.closed_form_failed)
            ev = {}
        out.append(_every(hypothesis_fails(f"geometry-{expected}", why, ev), "geometry", expected))
    elif s.balanced and p.G == p.K and mc is None:
        out.append(_every(Check(f"geometry-{expected}", Verdict.INCONCLUSIVE, f"no geometry certificate: the "
                                f"class-mean Gram is not formed for K = {p.K} > {SG.EXPAND_MAX} classes",
                                {"classes": p.K}), "geometry", expected))
    elif s.balanced and p.G == p.K and s.closed_form is None and s.geometry_how is not None \
            and s.geometry_how != SG.HOW_EXACT_PHASE_LB:
        # the geometry certificate proves the minimiser unique but knows it only within a proven radius of the
        # candidate: the candidate's classification is not the minimiser's (it REFUTED a true simplex ETF, K = 2,
        # label smoothing 0.99, lambda_b = 1, at a candidate 1e-3 off the exact antipodal means)
        out.append(_every(_enclosed_geometry(s, expected, mc), "geometry", expected))
    elif s.balanced and p.G == p.K:
        gram = np.asarray(mc)
        cls = G.classify_gram(gram if np.linalg.norm(gram) > 0 else np.zeros_like(gram))
        chk = geometry_is(f"geometry-{expected}", expected, cls)
        out.append(_every(at_certified_point(chk, value=cert.upper, lower_bound=cert.lower_bound, tol=tol,
                                             unique=s.geometry_how is not None, how=s.geometry_how or ""),
                          "geometry", expected))
    if "minority" in s.geometry and not any(c.name == "minority-geometry" for c in stated):
        m = s.geometry["minority"]
        chk = Check("minority-geometry", Verdict.VERIFIED, f"measured at the certified candidate: minority classifier "
                    f"cosine {fmt(m['minority_classifier_cosine'])}, classifier norm ratio "
                    f"{fmt(m['classifier_norm_ratio'])}", dict(m))
        out.append(_every(at_certified_point(chk, value=cert.upper, lower_bound=cert.lower_bound, tol=tol),
                          "minority-geometry"))
    return out


def _enclosed_geometry(s: "SG.GeneralSolution", expected: str, cosines) -> Check:
    """``geometry-<expected>`` of every minimiser from the geometry certificate's proven enclosure (balanced classes, no
    closed form: a decayed bias). Every minimiser's class-mean cosine matrix C* is within the proven half-width h of
    the candidate's C entrywise (diagonal exactly 1), so ||C* - C||_F <= h sqrt(K (K - 1)) and the template distance of
    classify_gram (Frobenius distance of C / ||C||_F to the template) moves by at most r = 2 h sqrt(K (K - 1)) / ||C||_F
    (||A/||A|| - B/||B|| || <= 2 ||A - B|| / ||A||): simplex-etf / orthogonal-frame by core.point_statement with that
    radius. zero: VERIFIED by the exact phase (:func:`_decayed_bias_geometry`), REFUTED when a class-mean norm is
    proven > 0. A class mean whose norm interval reaches 0 leaves the cosines of the minimiser undefined: not
    decided."""
    name, p, g = f"geometry-{expected}", s.problem, s.intervals or {}
    nlo = np.asarray((g.get("_intervals") or {}).get("mean_norm", (np.zeros(0), None))[0], dtype=float)
    how = s.geometry_how or ""
    ev = {"geometry_certificate": how, "class_mean_norm_lower": float(nlo.min()) if nlo.size else None}
    if expected == "zero":
        if _decayed_bias_geometry(s) == "zero":
            return Check(name, Verdict.VERIFIED, "the minimiser is Z* = 0: exact phase rho0 <= 1 of the free-bias "
                         "problem in rational arithmetic (a decayed bias only fixes the constant a free bias leaves "
                         "open)", ev)
        if nlo.size and exceeds(float(nlo.max()), 0.0):
            return Check(name, Verdict.REFUTED, f"every minimiser has a class mean of norm >= {fmt(float(nlo.max()), 3)}"
                         f" > 0 ({how})", ev)
        return Check(name, Verdict.INCONCLUSIVE, "the proven class-mean norms do not decide whether the minimiser is "
                     "zero", ev)
    if _decayed_bias_geometry(s) == "zero":
        return Check(name, Verdict.REFUTED, f"the minimiser is Z* = 0 (zero class means), not {expected}: exact phase "
                     "rho0 <= 1 of the free-bias problem in rational arithmetic", ev)
    if expected not in ("simplex-etf", "orthogonal-frame"):
        return Check(name, Verdict.INCONCLUSIVE, f"not judged: a proven radius decides only simplex-etf, "
                     f"orthogonal-frame and zero statements, not {expected!r}", ev)
    h = g.get("class_mean_cosines_halfwidth")
    if cosines is None or not nlo.size or not exceeds(float(nlo.min()), 0.0) or not is_finite(h):
        return Check(name, Verdict.INCONCLUSIVE, "not decided: a class mean of the minimiser is not proven nonzero "
                     "(its cosines are undefined) or no cosine enclosure was formed", ev)
    C = np.asarray(cosines, dtype=float)
    cls = G.classify_gram(C)
    dev = cls.distance_etf if expected == "simplex-etf" else cls.distance_of
    K = C.shape[0]
    r = 2.0 * float(h) * math.sqrt(K * (K - 1)) / float(np.linalg.norm(C))
    return point_statement(name, dev, cls.tol, radius=r, how=how,
                           what=f"distance of the class-mean cosine matrix to the {expected} template",
                           evidence={**ev, **cls.to_dict(), "cosine_halfwidth": float(h)})


def _decayed_bias_geometry(s: "SG.GeneralSolution") -> str:
    """The package's geometry statement where no closed form is the prediction: "zero" when a balanced instance with a
    decayed bias (lb > 0) is in its exact zero phase, else "simplex-etf". One-hot MSE: K^2 n lw lh >= 1 in rationals
    (:func:`SG.regularised_bias_mse_phase`). Softmax losses with equal weights: the free-bias phase rho0 <= 1 of
    :func:`SG.exact_phase` (the penalty only fixes the constant a free bias leaves open: every free-bias minimiser has
    a bias b' = b* + c 1 and the one with b' = 0, which exists by symmetry, is the minimiser with the penalty, so both
    problems have the same Z*). Before, 'simplex-etf' was stated there and REFUTED by the package itself on true
    instances (e.g. --loss ce -k 3 -n 3 -d 3 --lambda-w 0.3 --lambda-h 0.3 --lambda-b 0.1)."""
    p = s.problem
    if (s.uniqueness or {}).get("regularised_bias_phase", {}).get("zero_minimiser"):
        return "zero"
    if p.lb > 0.0 and s.balanced and p.G == p.K and getattr(p.loss, "gradient_determines", None) == \
            "logits-mod-constant":
        ex = SG.exact_phase(dataclasses.replace(p, lb=0.0))
        if ex is not None and ex["zero_minimiser"]:
            return "zero"
    return "simplex-etf"


def _below_rank_report(s: "SG.GeneralSolution", claimed_value, t0: float) -> SolveReport:
    """d below the rank of the relaxation's optimum: the best point in dimension d (the engine's ``rank_d``) against
    the relaxation's bound (imbalanced MSE: the exact rank-d bound of von Neumann's trace inequality)."""
    p, cert, rd, rank = s.problem, s.certificate, s.rank_d, s.rank
    lower = cert.lower_bound
    claims: list[Check] = []
    if rd["route"] == "von-neumann":
        best, lower_d = rd["best"], rd["lower_d"]
        claims.append(hypothesis_fails("optimal-value", f"the imbalanced-MSE closed form needs d >= its rank: d = "
                                       f"{p.d} < {rank}"))
        claims.append(_rank_d_value(best, lower_d, lower, p.d))
        if claimed_value is not None:
            claims.append(lower_bound_claim_general(claimed_value, lower_d, best))
        return SolveReport("ufm", p.to_dict(), {"value": best, "note": "d below the rank: the soft-thresholded "
                           "targets truncated to rank d (exact by von Neumann's trace inequality)"},
                           {"value": best, "method": "closed form truncated to rank d", "rank_limit": p.d},
                           _below_rank_certificate(rd["certificate"], best), {"relaxation_rank": rank}, claims,
                           s.routes, s.diagnostics, seconds=time.perf_counter() - t0, live=s.live)
    if rd["route"] == "skipped":
        ev = {"relaxation_lower_bound": lower, "relaxation_rank": rank, "d": p.d, "rank_d_search": rd["why"]}
        claims.append(Check("relaxation-tight", Verdict.INCONCLUSIVE,
                            f"d = {p.d} is below the rank {rank} of the convex relaxation's optimum, so the "
                            f"relaxation is not tight here: the optimum is >= the relaxation's lower bound "
                            f"{fmt(lower)}; no point in dimension d was searched ({ev['rank_d_search']})", ev))
        if claimed_value is not None:
            claims.append(lower_bound_claim_general(claimed_value, lower, None))
        return SolveReport("ufm", p.to_dict(), {"value": None, "note": "no prediction: d is below the rank of the "
                           "relaxation's optimum"}, None, _below_rank_certificate(cert, None),
                           {"relaxation_rank": rank}, claims, s.routes, s.diagnostics,
                           seconds=time.perf_counter() - t0, live=s.live)
    best = rd["best"]
    gap = best - lower
    tol = tolerance(best, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    ev = {"relaxation_lower_bound": lower, "best_point_value": best, "gap": gap, "relaxation_rank": rank,
          "d": p.d, "tolerance": tol}
    if within(gap, tol):
        claims.append(Check("optimal-value", Verdict.VERIFIED, f"the best point in dimension d = {p.d} attains the "
                            f"relaxation's bound (gap {fmt(gap, 3)} <= {fmt(tol, 3)})", ev))
    else:
        claims.append(Check("relaxation-tight", Verdict.INCONCLUSIVE,
                            f"d = {p.d} is below the rank {rank} of the convex relaxation's optimum, so the "
                            f"relaxation is not tight here: the optimum lies between the relaxation's lower "
                            f"bound {fmt(lower)} and the best point found, {fmt(best)} (gap {fmt(gap, 3)}); "
                            f"no geometry is predicted for this d", ev))
    if claimed_value is not None:
        claims.append(lower_bound_claim_general(claimed_value, lower, best))
    predicted = {"value": None, "note": "no prediction: d is below the rank of the relaxation's optimum"}
    sol_d = {"value": best, "method": rd["run"].method, "rank_limit": p.d}
    return SolveReport("ufm", p.to_dict(), predicted, sol_d, _below_rank_certificate(cert, best),
                       {"relaxation_rank": rank, "note": "not reported: the relaxation's geometry does not fit in "
                        f"d = {p.d} dimensions"}, claims, s.routes, s.diagnostics,
                       seconds=time.perf_counter() - t0, live=s.live)


def _interval_statement(name: str, what: str, interval, expected, tol: float, how: str, evidence: dict) -> Check:
    """"``what`` equals ``expected`` within ``tol`` at every minimiser", from its proven interval [lo, hi]:
    VERIFIED when [lo, hi] lies in expected +- tol, REFUTED when it misses expected +- tol entirely (every
    minimiser's value is off by more than tol), INCONCLUSIVE otherwise. ``expected`` None: the interval's
    midpoint (the reported value), so the statement is "the reported value holds within tol"."""
    ev = dict(evidence)
    if interval is None:
        return Check(name, Verdict.INCONCLUSIVE, f"{what}: not defined (a zero vector has no cosine)", ev)
    lo, hi = float(interval[0]), float(interval[1])
    c = 0.5 * (lo + hi) if expected is None else float(expected)
    ev.update(interval=[lo, hi], expected=c, tolerance=tol, reported=0.5 * (lo + hi))
    if not is_finite(lo, hi, c):
        return Check(name, Verdict.INCONCLUSIVE, f"{what}: not a finite number", ev)
    if within(c - tol - lo, 0.0) and within(hi - (c + tol), 0.0):
        return Check(name, Verdict.VERIFIED, f"{what} = {fmt(c, 6)} +- {fmt(tol, 2)} at every minimiser: proven in "
                     f"[{fmt(lo, 8)}, {fmt(hi, 8)}] ({how})", ev)
    if exceeds(c - tol - hi, 0.0) or exceeds(lo - (c + tol), 0.0):
        return Check(name, Verdict.REFUTED, f"{what} = {fmt(c, 6)} +- {fmt(tol, 2)} is false: at every minimiser it "
                     f"lies in [{fmt(lo, 8)}, {fmt(hi, 8)}] ({how})", ev)
    return Check(name, Verdict.INCONCLUSIVE, f"{what}: the proven interval [{fmt(lo, 8)}, {fmt(hi, 8)}] is wider "
                 f"than the tolerance around {fmt(c, 6)}", ev)


def _geometry_certificate_claims(p, enc: dict, gcert: dict | None, cert, expected: dict | None,
                                structural: dict | None = None) -> list[Check]:
    """``minimiser-unique`` (the enclosure proven and rank(X*) <= d proven), ``minority-geometry`` (imbalanced
    counts: the minority measures within GEOMETRY_TOL at every minimiser) and ``class-mean-cosines`` (every
    class-mean cosine within GEOMETRY_TOL), from :func:`SG.minimiser_enclosure` / :func:`SG.geometry_enclosure`;
    ``structural``: the engine's :func:`SG.structural_uniqueness` (used when no enclosure is proven).
    ``expected`` (tests, or a user's statement): {"minority_classifier_cosine": c, "classifier_norm_ratio": r,
    "mean_norm_ratio": r, "minority_mean_cosine": c, "class_mean_cosines": K x K} replaces the reported values."""
    expected = dict(expected or {})
    ev = {k: v for k, v in enc.items() if k != "center"}
    out: list[Check] = []
    if not enc["ok"]:
        st = structural if structural is not None else {"ok": False, "why": "no structural uniqueness evidence"}
        vtol = tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
        if st["ok"] and within(cert.gap, vtol):
            out.append(_unique_check(Verdict.VERIFIED,
                             f"unique in (Z, centred bias): {st['why']}; the optimum is certified (gap "
                             f"{fmt(cert.gap, 3)}); no proven radius ({enc.get('why')}), so no geometry statement",
                             {**ev, **st}))
        else:
            out.append(_unique_check(Verdict.INCONCLUSIVE, f"no geometry certificate: {enc.get('why')}", ev))
        return out
    if enc["rank_bound"] > p.d:
        out.append(_unique_check(Verdict.INCONCLUSIVE,
                         f"rank of the minimiser not proven <= d = {p.d}: the bound is {enc['rank_bound']} (structural "
                         f"{enc['rank_bound_structural']}, dual {enc['rank_bound_dual']}), so the factored minimisers "
                         "may differ from the relaxation's unique minimiser", ev))
        return out
    out.append(_unique_check(Verdict.VERIFIED,
                     f"unique in (Z, centred bias): {enc['uniqueness']}; rank(Z*) <= {enc['rank_bound']} <= d = {p.d} "
                     f"(structural {enc['rank_bound_structural']}, dual/Weyl {enc['rank_bound_dual']}), so every "
                     "factored minimiser is a balanced factorization of Z* (unique up to rotations of feature space); "
                     f"proven radius ||X* - Xhat||_F <= {fmt(enc['radius'], 3)} ({fmt(enc['radius_relative'], 3)} "
                     "relative)", ev))
    how = (f"radius {fmt(enc['radius'], 3)}, Gram matrices within {fmt(gcert['gram_frobenius_radius'], 3)} "
           "(Araki-Yamagami), interval arithmetic")
    mino = gcert.get("minority")
    if mino is not None:
        checks = []
        for key, what in (("minority_classifier_cosine", "mean cosine between the smallest-count classes' classifiers"),
                          ("minority_mean_cosine", "mean cosine between the smallest-count classes' class means"),
                          ("classifier_norm_ratio", "classifier norm ratio (smallest-count / largest-count classes)"),
                          ("mean_norm_ratio", "class-mean norm ratio (smallest-count / largest-count classes)")):
            if mino.get(key) is None and key not in expected:
                continue
            checks.append(_interval_statement(key, what, mino.get(key), expected.get(key), GEOMETRY_TOL, how, {}))
        verdicts = [c.verdict for c in checks]
        v = (Verdict.REFUTED if Verdict.REFUTED in verdicts else Verdict.VERIFIED
             if verdicts and all(x == Verdict.VERIFIED for x in verdicts) else Verdict.INCONCLUSIVE)
        out.append(_every(Check("minority-geometry", v, "; ".join(c.reason for c in checks)
                                or "no minority measure defined",
                                {"measures": {c.name: {"verdict": c.verdict.value, **c.evidence} for c in checks},
                                 "source": GEOMETRY_SOURCE, "minority_classes": mino["minority_classes"],
                                 "majority_classes": mino["majority_classes"]}), "minority-geometry"))
    lo, hi = gcert["_intervals"]["mean_cos"]
    exp_c = expected.get("class_mean_cosines")
    nlo, nhi = gcert["_intervals"]["mean_norm"]
    if exp_c is None and np.min(nlo) <= 0.0:
        # the reported cosines are the statement; a class mean not bounded away from zero at the minimiser (the
        # zero phase: Z* = 0) has no cosine, so none is stated (a user's expected cosines are still judged)
        out.append(hypothesis_fails("class-mean-cosines", "cosines need nonzero class means; the proven class-mean "
                                    f"norm intervals reach 0 (smallest lower end {fmt(float(np.min(nlo)), 3)}, largest "
                                    f"upper end {fmt(float(np.max(nhi)), 3)})",
                                    {"mean_norm_interval": [float(np.min(nlo)), float(np.max(nhi))]}))
        return out
    C = 0.5 * (lo + hi) if exp_c is None else np.asarray(exp_c, dtype=float)
    if C.shape != lo.shape:
        out.append(Check("class-mean-cosines", Verdict.INCONCLUSIVE, f"expected cosines of shape {C.shape}, the "
                         f"instance has {lo.shape}", {}))
        return out
    viol = np.maximum(lo - (C + GEOMETRY_TOL), (C - GEOMETRY_TOL) - hi)  # > 0: that entry is off at every minimiser
    inside = np.all((lo >= C - GEOMETRY_TOL) & (hi <= C + GEOMETRY_TOL))
    evc = {"halfwidth": gcert["class_mean_cosines_halfwidth"], "tolerance": GEOMETRY_TOL,
           "centring": gcert["centring"], "source": GEOMETRY_SOURCE}
    if np.any(viol > 0):
        i, j = np.unravel_index(int(np.argmax(viol)), viol.shape)
        out.append(Check("class-mean-cosines", Verdict.REFUTED, f"class-mean cosine ({i}, {j}) = {fmt(C[i, j], 6)} +- "
                         f"{GEOMETRY_TOL:g} is false: at every minimiser it lies in [{fmt(lo[i, j], 8)}, "
                         f"{fmt(hi[i, j], 8)}] ({how})", {**evc, "entry": [int(i), int(j)]}))
    elif inside:
        out.append(Check("class-mean-cosines", Verdict.VERIFIED, f"every class-mean cosine of every minimiser equals the "
                         f"reported one within {GEOMETRY_TOL:g} (proven half-width "
                         f"{fmt(gcert['class_mean_cosines_halfwidth'], 3)}; {how})", evc))
    else:
        out.append(Check("class-mean-cosines", Verdict.INCONCLUSIVE, f"the proven cosine intervals (half-width "
                         f"{fmt(gcert['class_mean_cosines_halfwidth'], 3)}) are wider than {GEOMETRY_TOL:g}", evc))
    return out


MINORITY_SOURCE = ("derived in this project (docs/ufm_general.md, 'Minority collapse threshold'); reconstructed "
                   "in the spirit of Fang et al., PNAS 2021 (minority collapse) and Hong & Ling 2023, not quoted")


#: "Collapsed within tolerance" for the minority-collapse statement (docs/ufm_general.md, "Minority collapse
#: threshold"): dev_a(X*) <= MINORITY_DEV_RTOL S, S = max(||X_c||_*, (m_a - 1) sqrt(n_a)), X_c the collapsed
#: candidate. dev_a / ||X||_* is half the sum of the relative squared spreads of the group's classifiers and class
#: means (||P_a W||^2 / ||W||^2 + n_a ||M P_a||^2 / ||H||^2 at a balanced factorization), so 1e-8 (the number of
#: the value tolerance GEN_VALUE_RTOL) means identical up to ~1e-4 of ||W||_F, ||H||_F in norm. The floor
#: (m_a - 1) sqrt(n_a) is dev_a of an invariant point whose within-group logit gap beta_a / sqrt(n_a) is 1: when
#: the optimum is (near) zero the tolerance is a within-group logit gap of 1e-8.
#: Measured radii / ||X_c||_* (counts 5 x 40 + 5 x 4, CE, after the polish): 2e-10 at theta = 0.9, 3e-9 at
#: 0.999 (VERIFIED), 5e-8 at 0.9999 (INCONCLUSIVE), none above theta = 1 (no margin).
MINORITY_DEV_RTOL = 1e-8
HOW_MINORITY_RADIUS = ("dual margin on the group's sum-zero eigenspace: for the dual point y of the certificate at the "
                       "collapsed candidate, every (Z, b) has F(Z, b) - D(y) >= delta dev_a(Z), delta = lam - |y_a| "
                       "(docs/ufm_general.md, 'Minority collapse threshold'), so every minimiser has dev_a <= "
                       "(f_up - D(y)) / delta")


def minority_collapse_check(p: "SG.GeneralUFM", layout, cert, *, threshold: float = 1.0, seed: int = 0,
                            time_budget: float | None = None) -> Check | None:
    """The minority-collapse threshold (docs/ufm_general.md): for the group a of exchangeable classes with the
    smallest count (m_a >= 2), theta_a = w_a (q_true - q_other) sqrt(n_a) / (N lam) (theory.ufm); the statement
    is "minority collapse (identical classifiers and identical class means on group a) iff theta_a <= threshold"
    (the derived theorem has threshold 1; tests pass others). Checked independently of the formula: the problem
    restricted to collapsed points (beta_a = 0) is solved and certified (its own dual bound), and at that collapsed
    candidate the unrestricted certificate's dual margin delta = lam - |y_a| on the group's sum-zero eigenspace
    gives a proven radius r >= dev_a(X*) for every minimiser X* (dev_a: the collapse measure of
    ``SG.minority_deviation``, 0 exactly at collapse).
    - predicted collapse: REFUTED when the restricted problem's proven lower bound exceeds f*'s feasible value by
      more than the value tolerance (no minimiser is collapsed); VERIFIED when r <= tau (every minimiser collapsed
      within tau, ``point_statement`` at the collapsed candidate); otherwise INCONCLUSIVE (near theta_a = 1 the
      margin tends to 0 and no radius is proven: a value match does not certify the point);
    - predicted no collapse: VERIFIED when the restricted lower bound exceeds f*'s feasible value by more than
      the tolerance (no minimiser is collapsed: averaging a collapsed minimiser over the exchangeable classes
      would give a collapsed invariant one); REFUTED when r <= tau (every minimiser is collapsed within tau, while
      the prediction needs a deviation beyond tau); otherwise INCONCLUSIVE."""
    ev = SG.minority_evidence(p, layout, cert, seed=seed, time_budget=time_budget, dev_rtol=MINORITY_DEV_RTOL)
    return judge_minority_collapse(p, ev, threshold=threshold)


def judge_minority_collapse(p: "SG.GeneralUFM", evidence: dict | None, *, threshold: float = 1.0) -> Check | None:
    """The statement of :func:`minority_collapse_check` judged from the engine's evidence
    (``solvers.ufm_general.minority_evidence``; None: no statement for this loss or these groups)."""
    threshold = as_float("minority_threshold", threshold, positive=True)  # NaN VERIFIED "theta > nan"
    if evidence is None:
        return None
    gap = evidence["target_gap"]
    failed = T.minority_collapse_hypotheses(gap)
    if failed:
        return hypothesis_fails("minority-collapse-threshold", "; ".join(failed), {"target_gap": gap})
    a, count, size = evidence["group"], evidence["count"], evidence["size"]
    theta = T.minority_collapse_ratio(count, p.N, p.lw, p.lh, weight=evidence["weight"], target_gap=gap)
    predicted_collapse = theta <= threshold
    cc, rad = evidence["restricted"], evidence["radius"]
    f_up, f_lo = evidence["f_star_upper"], evidence["f_star_lower"]
    tol = tolerance(f_up, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    d_up = cc.upper - f_lo  # >= min over collapsed points - f*
    d_lo = cc.lower_bound - f_up  # <= min over collapsed points - f*
    scale = evidence["deviation_scale"]
    tau = tolerance(scale, rtol=MINORITY_DEV_RTOL, atol=0.0)
    polished = evidence["polished"]
    ev = {"group": int(a), "group_count": int(count), "group_size": int(size), "theta": theta,
          "threshold": threshold, "predicted": "collapse" if predicted_collapse else "no collapse",
          "collapsed_value": cc.upper, "collapsed_lower_bound": cc.lower_bound, "f_star_upper": f_up,
          "f_star_lower": f_lo, "excess_upper": d_up, "excess_lower": d_lo, "tolerance": tol,
          "value_tolerance": tol, "deviation_tolerance": tau, "deviation_scale": scale, **rad,
          "polished": polished, "source": MINORITY_SOURCE,
          "meaning": "collapse: identical classifiers and identical class means on the smallest-count group; "
                     "dev_a = (sqrt(lw/lh) sum ||w_c - wbar||^2 + sqrt(lh/lw) n_a sum ||mu_c - mubar||^2) / 2 "
                     "over the group's classes"}
    name = "minority-collapse-threshold"
    what = f"theta = {fmt(theta, 6)} {'<=' if predicted_collapse else '>'} {fmt(threshold, 6)}"
    if not (is_finite(d_up) and is_finite(d_lo)):
        return Check(name, Verdict.INCONCLUSIVE, f"{what}: the restricted (collapsed) problem was not certified", ev)
    ps = point_statement(name, 0.0, tau, radius=rad["radius"], how=HOW_MINORITY_RADIUS,
                         what="minority deviation dev_a (0 at the collapsed candidate)")
    proven_collapsed = ps.verdict == Verdict.VERIFIED  # every minimiser within tau of collapsed
    ev_ps = {**ev, **ps.evidence, "tolerance": tol}
    no_radius = ("no radius proven: the dual margin delta = lam - |y_a| is "
                 f"{fmt(rad['margin_delta'], 3)}" if rad["radius"] is None else
                 f"the proven radius {fmt(rad['radius'], 3)} exceeds the deviation tolerance {fmt(tau, 3)}")
    if predicted_collapse:
        if exceeds(d_lo, tol):
            return Check(name, Verdict.REFUTED, f"{what} predicts collapse, but every collapsed point is above the "
                         f"optimum by >= {fmt(d_lo, 3)} > tolerance {fmt(tol, 3)} (proven bound of the restricted "
                         "problem): no minimiser is collapsed", ev)
        if proven_collapsed:
            return Check(name, Verdict.VERIFIED, f"{what}: every minimiser has identical classifiers and class means "
                         f"on the smallest-count group within tolerance: dev_a <= proven radius {fmt(rad['radius'], 3)}"
                         f" <= {fmt(tau, 3)} (dual margin delta = {fmt(rad['margin_delta'], 3)}, "
                         f"|y_a|/lam <= {fmt(rad['margin_ratio'], 6)})", ev_ps)
        return Check(name, Verdict.INCONCLUSIVE, f"{what} predicts collapse: a collapsed point is within "
                     f"{fmt(max(d_up, 0.0), 3)} of the optimum's value, but a value does not certify the point; "
                     f"{no_radius}", ev_ps)
    if exceeds(d_lo, tol):
        return Check(name, Verdict.VERIFIED, f"{what}: every collapsed point is above the optimum by >= "
                     f"{fmt(d_lo, 3)} > {fmt(tol, 3)} (proven bound of the restricted problem): no minimiser has "
                     "identical classifiers or class means on the smallest-count group", ev)
    if proven_collapsed:
        return Check(name, Verdict.REFUTED, f"{what} predicts no collapse, but every minimiser is collapsed within "
                     f"tolerance: dev_a <= proven radius {fmt(rad['radius'], 3)} <= {fmt(tau, 3)} (dual margin delta "
                     f"= {fmt(rad['margin_delta'], 3)}), while no collapse needs a deviation beyond {fmt(tau, 3)}",
                     ev_ps)
    return Check(name, Verdict.INCONCLUSIVE, f"{what} predicts no collapse, but the collapsed optimum is within "
                 f"{fmt(max(d_up, 0.0), 3)} of f* (tolerance {fmt(tol, 3)}) and {no_radius}: not resolved at this "
                 "precision", ev_ps)


def _below_rank_certificate(cert, best: float | None) -> dict:
    """The certificate of a report with d below the rank of the relaxation's optimum: ``upper`` only for a value
    attained in dimension d (the best rank-d point; None when none was computed), the relaxation's own feasible
    value kept as ``relaxation_upper`` (it is not attainable with d features)."""
    out = cert.to_dict()
    out["relaxation_upper"] = out.get("upper")
    out["upper"] = best
    out["gap"] = (best - cert.lower_bound) if best is not None and is_finite(best, cert.lower_bound) else None
    out["upper_note"] = "upper: attained in dimension d (null: no rank-d point computed); relaxation_upper: not attainable"
    return out


def lower_bound_claim_general(claimed: float, lower: float, best: float) -> Check:
    """A claimed optimal value when the relaxation is not tight: refuted by a feasible point below it or by
    the proven lower bound above it; otherwise undecided."""
    tol = tolerance(claimed, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    return optimum_matches("claimed-value", claimed, attained=best, lower_bound=lower, tol=tol,
                           certificate="relaxation bound")


def check_regression(Y: np.ndarray, d: int, lw: float, lh: float, *, claimed_value: float | None = None,
                     factored: bool = True, seed: int = 0, targets_path: str | None = None) -> SolveReport:
    """Neural regression collapse (Andriopoulos et al. 2024; docs/ufm_general.md, "Regression"): the closed
    form by singular-value soft thresholding of the centred targets, certified by the dual bound (squared
    error conjugate) at the closed form, an independent factored solve, and the predicted geometry.

    The instance records the targets so that `--rigorous` can rebuild them (docs/rigorous.md, "Regression"):
    ``targets_sha256`` (float64 little-endian, C order) always, the targets themselves when N m <=
    ``solvers.rigorous.regression.INLINE_TARGETS_MAX``, and ``targets_path`` (the file they were read from, as
    given by the caller) when known."""
    from solvers.losses import SquaredError
    from solvers.rigorous.regression import INLINE_TARGETS_MAX, targets_sha256

    t0 = time.perf_counter()
    seed = as_int("seed", seed, minimum=0)
    claimed_value = None if claimed_value is None else as_float("claimed_value", claimed_value)
    Y = _validate_targets(Y)
    N, m = Y.shape
    loss = SquaredError(Y.T, "squared-error (regression)")
    meta = {"targets_shape": [N, m], "targets_sha256": targets_sha256(Y)}
    if targets_path is not None:
        meta["targets_path"] = str(targets_path)
    if N * m <= INLINE_TARGETS_MAX:
        meta["targets"] = Y.tolist()
    p = SG.GeneralUFM(loss, m, np.ones(N, dtype=np.int64), np.arange(N), d, lw, lh, 0.0, "regression", meta)
    s = SG.solve(p, seed=seed, targets=Y, factored=factored, value_rtol=GEN_VALUE_RTOL)
    cf, cert = s.closed_form, s.certificate
    claims: list[Check] = []
    pred_value = cf["value"] if claimed_value is None else float(claimed_value)
    predicted = {"value": cf["value"], "rank": cf["rank"], "threshold_N_lambda": cf["threshold"],
                 "singular_values_centred_targets": cf["singular_values"].tolist()[:50],
                 "source": "Andriopoulos et al. 2024 (neural regression collapse); docs/ufm_general.md"}
    if not s.tight:
        # the closed form is outside its hypothesis (d >= rank): NOT_APPLICABLE for the package's prediction. A
        # claimed value follows the rule of every route below the rank (check_general): REFUTED below the
        # relaxation's proven bound or above a value attained in dimension d, INCONCLUSIVE between. The rank-d point:
        # the soft-thresholded targets truncated to their d largest singular values (feasible with d features),
        # bounded from below by von Neumann's trace inequality (the engine's rank_d).
        rd = s.rank_d
        best, lower_d = rd["best"], rd["lower_d"]
        claims.append(hypothesis_fails("optimal-value", f"d >= rank of the soft-thresholded targets: d = {d} < "
                                       f"{cf['rank']}"))
        claims.append(_rank_d_value(best, lower_d, cert.lower_bound, d))
        if claimed_value is not None:
            chk = lower_bound_claim_general(float(claimed_value), lower_d, best)
            chk.evidence.update(rank_d_lower_bound=rd["rank_d_lower_bound"], relaxation_lower_bound=cert.lower_bound,
                                bound="von Neumann's trace inequality: the rank-d problem is separable in the "
                                      "singular values (docs/ufm_general.md, 'Regression')")
            claims.append(chk)
        sol_d = {"value": best, "method": "closed form truncated to rank d (feasible in dimension d)", "rank_limit": d}
        return SolveReport("ufm-regression", p.to_dict(), {**predicted, "value": None, "note": "no prediction: d is "
                           "below the rank of the soft-thresholded targets"}, sol_d,
                           _below_rank_certificate(rd["certificate"], best), {}, claims, s.routes, s.diagnostics,
                           seconds=time.perf_counter() - t0)
    attained = cert.upper if s.run is None else min(cert.upper, s.run.value)
    tol = tolerance(pred_value, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    claims.append(optimum_matches("optimal-value", pred_value, attained=attained, lower_bound=cert.lower_bound,
                                  tol=tol, certificate=cert.method))
    # uniqueness: squared error is strictly convex in the logits, so U* is unique; Z* 1 = 0 at every minimiser
    # (KKT: the right singular vectors of Z* lie in the row space of the gradient, orthogonal to 1): Z* unique
    claims.append(_unique_check(Verdict.VERIFIED if within(cert.gap, tol) else Verdict.INCONCLUSIVE,
                        "strictly convex loss: every minimiser has the same logits U*, and Z* = U* (I - 11^T/N) "
                        "(docs/ufm_general.md, 'Regression')", {"gap": cert.gap}))
    geometry = {**s.geometry, "geometry_certificate": s.geometry_how}
    solution = {"value": cert.upper, "method": "closed form (singular-value soft thresholding)", "converged": True}
    return SolveReport("ufm-regression", p.to_dict(), predicted, solution, cert.to_dict(), geometry, claims, s.routes,
                       s.diagnostics, seconds=time.perf_counter() - t0)


def _rank_d_value(best: float, lower_d: float, relaxation_lower: float, d: int) -> Check:
    """``rank-d-value``: the optimum with d features (below the rank of the closed form) is the soft-thresholded
    targets truncated to their d largest singular values: attained there (``best``, the objective at that feasible
    point) and proven from below by von Neumann's trace inequality (``lower_d``)."""
    tol = tolerance(best, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    return optimum_matches("rank-d-value", best, attained=best, lower_bound=lower_d, tol=tol,
                           certificate="rank-d bound (von Neumann's trace inequality)",
                           evidence={"prediction": "the closed form truncated to its d largest singular values",
                                     "relaxation_lower_bound": relaxation_lower, "d": d})


#: Regression targets: at most this many entries (N m); the certificate's SVD is O(N m min(N, m)).
MAX_TARGET_ENTRIES = 4_000_000


def _validate_targets(Y) -> np.ndarray:
    Y = np.asarray(Y)
    if Y.ndim != 2:
        raise InputError(f"targets must have shape (N, m) (one row of m targets per sample), got shape {Y.shape}")
    if Y.shape[0] < 2 or Y.shape[1] < 1:
        raise InputError(f"targets must have N >= 2 rows and m >= 1 columns, got shape {Y.shape}")
    if Y.size > MAX_TARGET_ENTRIES:
        raise InputError(f"targets have {Y.size} entries > {MAX_TARGET_ENTRIES} (budget of the certificate's SVD)")
    if not np.issubdtype(Y.dtype, np.number) or np.iscomplexobj(Y):
        raise InputError(f"targets must be real numbers, got dtype {Y.dtype}")
    Y = Y.astype(float)
    if not np.all(np.isfinite(Y)):
        raise InputError("targets must be finite (no NaN or inf)")
    if np.max(np.abs(Y)) > 1e12:
        raise InputError("targets must have |entries| <= 1e12")
    return Y


# =====================================================================================================
# One certified value per instance (rows of `ncproofs table ufm`)
# =====================================================================================================

#: The work estimate of a certified value (``table ufm`` plans its rows with it) lives with the engine.
estimate_value = SG.estimate_value


def certify_value(p: "SG.GeneralUFM", *, starts: int = 1, seed: int = 0, time_budget: float | None = None) -> dict:
    """The optimal value of one instance (d >= the rank of the optimum) with its certificate, as numbers:
    ``value`` (objective at an explicit feasible point: an upper bound), ``lower_bound`` (proven, Fenchel dual;
    docs/ufm_general.md), ``gap``, ``certified`` (the claim ``optimal-value`` is VERIFIED: gap within
    GEN_VALUE_RTOL and, where a closed form exists, the closed form inside the bracket), ``closed_form``
    (value or None), ``margin``, ``phase``, and the minority-collapse measures at the certified point
    (imbalanced counts; a measurement at the candidate, not a statement about every minimiser).

    Balanced classes with a closed form: the candidate is the closed form's point itself (one group, O(K) work).
    Otherwise the grouped (or, without exchangeable classes, the class-reduced) solver and its certificate."""
    s = SG.solve(p, starts=starts, seed=seed, time_budget=time_budget, evidence="value")
    cf, cert = s.closed_form, s.certificate
    out: dict = {"closed_form": None, "margin": None, "phase": None}
    if cf is not None:
        out.update(closed_form=cf["value"], margin=cf["margin"], phase="trivial" if cf["trivial"] else "collapse")
    pred = cf["value"] if cf is not None else cert.upper
    tol = tolerance(pred, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    chk = optimum_matches("optimal-value", pred, attained=cert.upper, lower_bound=cert.lower_bound, tol=tol,
                          certificate=cert.method)
    out.update(value=cert.upper, lower_bound=cert.lower_bound, gap=cert.gap, certified=chk.verdict == Verdict.VERIFIED,
               verdict=chk.verdict.value if hasattr(chk.verdict, "value") else str(chk.verdict), reason=chk.reason,
               tolerance=tol, candidate=s.candidate, certificate=cert.method,
               # the certified candidate, for `table ufm --rigorous` (the ball recipe bounds it: no second solve)
               live=s.live)
    if p.kind == "classification" and np.unique(p.counts).size > 1:
        mino = s.geometry.get("minority") or {}
        out.update(minority_classifier_cosine=mino.get("minority_classifier_cosine"),
                   classifier_norm_ratio=mino.get("classifier_norm_ratio"))
    return out
