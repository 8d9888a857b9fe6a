"""The unconstrained-features model with any convex loss, any class sizes, and regression (docs/ufm_general.md).

The public API of the any-loss engine. :func:`solve` is its one entry point: given an instance it plans the
routes, finds the candidate, certifies its value and the geometry of the minimiser, and returns everything in a
:class:`GeneralSolution` (numbers and evidence, never verdicts; ``proofs_check.claims.ufm_general.check_general``
states the statements and judges them). The parts, re-exported here so that ``solvers.ufm_general.X`` names all
of them:

- :mod:`solvers.ufm_general_core`: the instance (:class:`GeneralUFM`), its values, the class-reduced factored
  solver, the dual certificate, the uniqueness conditions and the geometry at a point, the closed forms;
- :mod:`solvers.ufm_general_grouped`: grouping exchangeable classes (solver, certificate, geometry, the dual
  margin of minority collapse);
- :mod:`solvers.ufm_general_geometry`: the geometry certificate (a proven enclosure of every minimiser).

The same entry point serves regression (``problem.kind == "regression"``, ``targets=Y``) and one certified value
(``evidence="value"``, the rows of ``table ufm``). A part reads its own constants: change one (a test's
monkeypatch) in the module that defines it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from solvers.common import Certificate, Solution, blas_threads, work_text
from solvers.ufm_general_core import (  # noqa: F401
    EXPAND_MAX, FACE_TOL, FACTORED_EVALS_PER_START, FLOPS_PER_SECOND, GROUPED_EVAL_OVERHEAD, GROUPED_EVALS,
    GROUPED_EVALS_PER_START, GROUPED_FLOPS_M3, LAMBDA_MAX, LAMBDA_MIN, MAX_ENTRIES, MAX_GROUPED_CLASSES,
    MSE_CLOSED_FORM_MAX, RANK_RTOL, RANK_VALUE_RTOL, SAFETY_MESSAGE, SPECTRAL_SLACK, SPECTRAL_TOL, STRUCTURE_TOL,
    UNIT_ROUNDOFF, WALL_SAFETY_S, GeneralUFM, _cos, _gram_sqrts, _small_blas, certificate, class_layout,
    classification, clean_candidate, conjugate_columns, conjugate_slots, convex_value, data_term, estimate, geometry,
    mse_imbalanced_closed_form, polish_bias, regression_closed_form, repair_columns, repair_slots, solve_factored,
    spectral_slack, spectral_upper, truncate, uniqueness_conditions)
from solvers.ufm_general_geometry import (  # noqa: F401
    E_MINUS_1, GEOMETRY_FLOAT_FACTOR, TAU_MAX, _interval_cos, dual_columns, dual_columns_grouped,
    geometry_enclosure, is_finite_pair, minimiser_enclosure, structural_uniqueness)
from solvers.ufm_general_grouped import (  # noqa: F401
    FLAT_RTOL, RANK_SLACK, ROUND_ITERATIONS, STALL_FACTOR, STALL_MAX_RTOL, STALL_ROUNDS, TARGET_GAP_RTOL,
    GroupedPoint, _grouped_fun, certificate_grouped, clean_grouped, collapse_margin, geometry_grouped,
    grouped_full, grouped_value, invariant_to_full, minority_deviation, polish_bias_grouped, slot_logits,
    solve_grouped)
from theory._validate import InputError, as_float, finite as _finite

# ---------------------------------------------------------------------------------------------------
# The entry point: solve(problem) -> GeneralSolution
# ---------------------------------------------------------------------------------------------------

#: Budget of one instance (estimated from its sizes before anything is allocated; docs/ufm_general.md, "Budgets"):
#: seconds of work at the reference rate and bytes of memory. The same limits as the classic family's routes.
TIME_LIMIT_S = 100.0
MEMORY_CAP = 2.5e9
#: The balanced closed forms change phase (simplex ETF <-> zero) within this relative band of lambda, where float64
#: cannot tell which is the minimiser (the classic family's PHASE_RTOL, same value).
PHASE_RTOL = 1e-9
#: Accuracy targets of the evidence (the claims' tolerances; ``proofs_check.claims.ufm_general`` passes its own).
#: They decide which further evidence is computed (a fallback enclosure, a polish), never a verdict.
VALUE_RTOL = 1e-8
VALUE_ATOL = 1e-30
GEOMETRY_TOL = 1e-4
MINORITY_DEV_RTOL = 1e-8
#: The candidate is polished when the widest proven geometry interval is above this fraction of the geometry
#: tolerance (the radius grows like sqrt(gap)).
GEOMETRY_POLISH_FRACTION = 0.25
#: Work budget of that polish: L-BFGS evaluations (a count, so the verdict does not depend on the machine's load):
#: the evaluations the solve itself used, between GEOMETRY_POLISH_MIN_EVALS and GEOMETRY_POLISH_EVALS (so the
#: geometry certificate costs about as much as the value certificate at most).
GEOMETRY_POLISH_EVALS = 5000
GEOMETRY_POLISH_MIN_EVALS = 3000
#: The class-reduced (ungrouped) polish costs ~4 K G r flops per evaluation: only up to K G r = 1e7 (~0.1 s of work
#: per 1000 evaluations); the exact imbalanced-MSE closed form is never polished (its gap is at the float floor).
GEOMETRY_POLISH_MAX_KGR = 1e7
#: The collapsed candidate of the minority evidence is polished (L-BFGS from it, gtol this factor times the default,
#: at most MINORITY_POLISH_EVALS evaluations) when its first radius is not below the deviation tolerance but could be
#: after the polish (the radius is gap / delta; the default stop, gap <= 1e-11 x value, leaves gaps ~1e-10 relative
#: near theta = 1 and the polish brings them to ~5e-13 relative in < 1 s for CE; MINORITY_POLISH_GAP_FLOOR is that
#: floor). Measured: < 1000 evaluations suffice for CE near theta = 1.
MINORITY_POLISH_GTOL_FACTOR = 1e-2
MINORITY_POLISH_EVALS = 4000
MINORITY_POLISH_GAP_FLOOR = 5e-13

HOW_GENERAL_UNIQUE = ("the closed form is certified optimal (dual gap <= tol) and its dual certificate is strictly "
                      "complementary with an injective face (docs/ufm.md, 'Uniqueness'; docs/ufm_general.md)")
HOW_GEOMETRY_CERTIFICATE = ("geometry certificate: the minimiser in (Z, centred bias) is unique (strict convexity of "
                            "the loss in the centred logits, KKT structure) and every minimiser lies within the proven "
                            "radius of the dual point's centre (Fenchel-Young gap <= certified gap; docs/ufm_general.md, "
                            "'Geometry certificate')")


def _within(err, tol) -> bool:
    return _finite(err, tol) and float(err) <= float(tol)


def _tolerance(scale, rtol: float, atol: float) -> float:
    return float(atol + rtol * abs(float(scale))) if _finite(scale) else float(atol)


@dataclass
class GeneralSolution:
    """What :func:`solve` found for one instance: numbers and evidence, never verdicts.

    The candidate: ``point`` (grouped, with ``layout``) and/or ``X``, ``b`` (class coordinates; None for K >
    EXPAND_MAX), ``rank`` its numerical rank, ``run`` the solve that found it (a :class:`Solution`; for a closed
    form, a stand-in; None where no solver ran), ``candidate`` how it was found, ``certificate`` its proven lower
    bound and feasible value (``Certificate.method`` says how; after a polish for the geometry certificate, of the
    polished candidate), ``value_certificate`` the certificate of the candidate as first found (the bracket its
    value is certified with). ``tight``: rank <= d (the relaxation is attained in dimension d); else ``rank_d``
    holds the search in dimension d (``route`` "von-neumann" (exact bound), "factored" (best rank-d point) or
    "skipped" (``why``)). ``closed_form`` (balanced: the loss's closed form inside its hypotheses; regression: the
    soft-thresholded targets), ``closed_form_failed`` (its failed hypotheses), ``mse_closed_form`` (imbalanced
    MSE). ``uniqueness``: the evidence for a unique minimiser, its ``route`` "structural" | "phase-threshold" |
    "closed-form" | "enclosure" | "strict-convexity" ("phase-threshold": float64 within the phase band, ``exact``
    the side decided in rationals by :func:`exact_phase`); ``enclosure`` / ``intervals``: the geometry certificate
    (proven radius, proven geometry intervals); ``geometry``: the geometry to report (at the proven unique
    minimiser when ``geometry_how`` says how, else at the candidate), ``cosines`` its class-mean and classifier
    cosine matrices; ``minority``: the restricted (collapsed) problem of the smallest-count group. ``routes``: the
    solves run (the report's "routes"), ``plan``: which route was taken and why."""

    problem: GeneralUFM
    layout: object = None
    balanced: bool = False
    closed_form: dict | None = None
    closed_form_failed: list = field(default_factory=list)
    mse_closed_form: dict | None = None
    run: Solution | None = None
    candidate: str = ""
    certificate: Certificate | None = None
    value_certificate: Certificate | None = None
    point: GroupedPoint | None = None
    X: np.ndarray | None = None
    b: np.ndarray | None = None
    rank: int = 0
    tight: bool = True
    candidate_geometry: dict = field(default_factory=dict)
    geometry: dict = field(default_factory=dict)
    geometry_how: str | None = None
    cosines: tuple = (None, None)
    uniqueness: dict | None = None
    enclosure: dict | None = None
    intervals: dict | None = None
    rank_d: dict | None = None
    minority: dict | None = None
    routes: dict = field(default_factory=dict)
    plan: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def live(self) -> dict:
        """The candidate as live objects (``SolveReport.live``: ``--rigorous`` bounds it, no second solve)."""
        return {"problem": self.problem, "layout": self.layout, "point": self.point, "X": self.X, "b": self.b}


def closed_form_hypotheses(loss) -> list[str]:
    """The hypotheses of the balanced closed forms (docs/ufm_general.md, "Balanced closed form for label smoothing")
    that the loss objects do not check themselves: softmax losses need q_true > q_other (the derivation takes the
    true logit above the others by c* >= 0; with the `others` convention and eps > (K-1)/K the target prefers the
    other classes and the formula is wrong). Returns the failed hypotheses (empty: it applies)."""
    from solvers.losses import CrossEntropy

    if isinstance(loss, CrossEntropy) and not loss.q_true > loss.q_other:
        return [f"the closed form needs q_true > q_other (the target's own class above the others); here q_true = "
                f"{loss.q_true:g} <= q_other = {loss.q_other:g} (label smoothing eps = {loss.eps:g}, "
                f"{getattr(loss, 'convention', 'torch')} convention)"]
    return []


def closed_form_point(p: GeneralUFM, cf: dict):
    """X (class coordinates) and b of a balanced closed form: Z = m J_K per class (CE-type: m = c*, b = 0;
    MSE: m = z / sqrt(n), b = 1/K); X = Zc sqrt(n)."""
    K, n = p.K, int(p.counts[0])
    J = np.eye(K) - 1.0 / K
    if p.loss.name == "mse":
        return (cf["margin"] / math.sqrt(n)) * J * math.sqrt(n), np.full(K, 1.0 / K)
    return cf["margin"] * J * math.sqrt(n), np.zeros(K)


def closed_form_grouped(p: GeneralUFM, cf: dict) -> GroupedPoint:
    """The balanced closed form as an invariant point of one group: X = beta J (A = 0 on the all-ones
    direction, beta = c* sqrt(n) for CE-type losses, z for MSE), b = 0 (CE) or 1/K (MSE)."""
    n = int(p.counts[0])
    if p.loss.name == "mse":
        return GroupedPoint(np.zeros((1, 1)), np.array([float(cf["margin"])]), np.array([1.0 / p.K]))
    return GroupedPoint(np.zeros((1, 1)), np.array([float(cf["margin"]) * math.sqrt(n)]), np.zeros(1))


def near_phase_threshold(p: GeneralUFM, rtol: float = PHASE_RTOL) -> bool:
    """The balanced closed form changes phase (simplex ETF <-> zero) between lam (1 - rtol) and lam (1 + rtol): the
    phase is then not decided in float64 (the ufm-ce/ufm-mse band, same tolerance)."""
    n = int(p.counts[0])
    lo = p.loss.closed_form(p.K, n, p.lam * (1.0 - rtol))
    hi = p.loss.closed_form(p.K, n, p.lam * (1.0 + rtol))
    return lo is not None and hi is not None and bool(lo.get("trivial")) != bool(hi.get("trivial"))


#: Classes up to which :func:`exact_phase` also forms the gradient at zero and its Gram matrix in rational arithmetic
#: (O(K^3) Fractions); above it the identity M M^T = (w kappa)^2 (I - J/K) is used as derived.
EXACT_PHASE_MATRIX_MAX_K = 24

HOW_EXACT_PHASE = ("exact phase: rho0 <= 1 in exact rational arithmetic of the instance's doubles, so Z* = 0 is a "
                   "minimiser (KKT at 0 with the optimal bias b0) and the unique one in (Z, centred bias), also at "
                   "rho0 = 1 exactly: a second minimiser would make the loss affine on a segment from 0, which the "
                   "CE-type losses allow only along directions adding a constant per column (the loss unchanged, the "
                   "nuclear norm growing) and MSE along none (docs/ufm_general.md, 'Exact phase at the threshold')")


def exact_phase(p: GeneralUFM) -> dict | None:
    """The side of rho0 = 1 of a balanced instance decided in exact rational arithmetic (used where float64 puts
    lambda within PHASE_RTOL of the closed form's phase switch; docs/ufm_general.md, "Exact phase at the
    threshold"). The instance is its doubles (docs/rigorous.md, "Convert exactly"): lw, lh, the class weight w and
    the smoothing eps enter as the exact rationals of the doubles, the targets as the ball form's rationals
    (q_other = eps/K or eps/(K - 1), q_true = 1 - (K - 1) q_other: ``solvers.rigorous.ball_form``).

    At Z = 0 with the optimal bias b0 (softmax losses: b0 = 0, p0 = 1/K; one-hot MSE: b0 = 1/K; both make the bias
    gradient vanish for balanced counts) the loss gradient of class j is w (p0 1 - q_j) = w kappa (1/K 1 - e_j)
    (kappa = q_true - q_other, since 1/K - q_other = kappa/K), so in the sample matrix ||grad L(0, b0)||_2 =
    (w kappa sqrt(n) / N) ||M||_2 with M M^T = I - J/K (eigenvalues 1 and 0) and rho0^2 = (w kappa)^2 / (K^2 n lw
    lh), the rational of :func:`solvers.rigorous.ufm.balanced_phase`. For K <= EXACT_PHASE_MATRIX_MAX_K the
    gradient columns are formed in Fractions and M M^T and the bias gradient are compared with the formula.

    Returns {"rho0_squared": str (an exact rational p/q), "one_minus_rho0_squared": float (rounded, for reading),
    "zero_minimiser": rho0^2 <= 1, "at_threshold": rho0^2 == 1, "phase": "zero" | "threshold" | "collapse",
    "weight", "kappa", "bias_b0": str (rationals), "matrix_checked": bool}, or None outside the hypotheses:
    unbalanced counts, groups other than one per class, unequal weights, a bias penalty (lb > 0: the engine has no
    closed form there), a loss without a ball form (a user loss, regression targets) or targets that do not prefer
    the own class (kappa <= 0)."""
    from fractions import Fraction

    from solvers.rigorous import ball_form
    from solvers.rigorous.balls import NotCertified, Unsupported
    from solvers.rigorous.ufm import balanced_phase

    if p.kind != "classification" or p.G != p.K or not bool(np.all(p.counts == p.counts[0])) or p.lb != 0.0:
        return None
    try:
        bf = ball_form(p.loss)
    except (Unsupported, NotCertified):
        return None
    K, n, N = p.K, int(p.counts[0]), p.N
    if bf.softmax:
        ws = set(bf.weights)
        if len(ws) != 1:
            return None
        w, q_t, q_o = Fraction(ws.pop()), bf.q_true, bf.q_other
        b0, p0 = Fraction(0), Fraction(1, K)  # softmax(0 + 0) = 1/K
    else:
        w, q_t, q_o = Fraction(1), Fraction(1), Fraction(0)
        b0 = p0 = Fraction(1, K)  # the logits U = b0 = 1/K
    kappa = q_t - q_o
    if not kappa > 0 or q_t + (K - 1) * q_o != 1:
        return None
    checked = False
    if K <= EXACT_PHASE_MATRIX_MAX_K:
        # gradient at (0, b0), class j (one column per class of the class-reduced problem): w (p0 - q_j)
        M = [[w * (p0 - (q_t if i == j else q_o)) for j in range(K)] for i in range(K)]
        c2 = (w * kappa) ** 2
        for i in range(K):
            if sum(M[i]) != 0:
                raise AssertionError(f"exact phase: the bias gradient at (0, b0) is {sum(M[i])} in row {i}, not 0")
            for j in range(K):
                mm = sum(M[i][t] * M[j][t] for t in range(K))
                if mm != c2 * ((1 if i == j else 0) - Fraction(1, K)):
                    raise AssertionError(f"exact phase: (M M^T)[{i},{j}] = {mm} is not (w kappa)^2 (I - J/K)")
        checked = True
    phase, r2 = balanced_phase(K, n, p.lw, p.lh, weight=w, kappa=kappa)
    lw, lh = Fraction(float(p.lw)), Fraction(float(p.lh))
    if r2 != (w * kappa) ** 2 * Fraction(n, N * N) / (lw * lh):
        raise AssertionError(f"exact phase: rho0^2 = {r2} is not n (w kappa)^2 / (N^2 lw lh)")
    return {"rho0_squared": f"{r2.numerator}/{r2.denominator}", "one_minus_rho0_squared": float(1 - r2),
            "zero_minimiser": r2 <= 1, "at_threshold": r2 == 1,
            "phase": phase, "weight": f"{w.numerator}/{w.denominator}",
            "kappa": f"{kappa.numerator}/{kappa.denominator}", "bias_b0": f"{b0.numerator}/{b0.denominator}",
            "matrix_checked": checked}


HOW_EXACT_PHASE_LB = ("exact phase (MSE, balanced, regularised bias lambda_b > 0): K^2 n lw lh >= 1 in exact rational "
                      "arithmetic of the instance's doubles, so Z* = 0 with b0 = 1/(K (1 + lambda_b)) is a minimiser "
                      "(KKT at 0: ||grad||_2 = 1/(K sqrt(n)) <= lam) and the unique one (the objective is strongly "
                      "convex in (U, b)); docs/ufm_general.md, 'MSE with a regularised bias'")


def regularised_bias_mse_phase(p: GeneralUFM) -> dict | None:
    """The exact phase and closed form of balanced one-hot MSE with a regularised bias (lb > 0; docs/ufm_general.md,
    "MSE with a regularised bias"). With mu = sqrt(n) lam the unique minimiser is Zc = alpha (I - J/K) + gamma J/K
    per class, alpha = max(0, 1 - K mu), gamma = max(0, 1 - K mu (1 + lb)/lb), b = (1 - gamma)/(K (1 + lb)) 1, and
    f* = (K - 1) [(alpha - 1)^2 / (2K) + mu alpha] + lb (1 - gamma)^2 / (2 K (1 + lb)) + mu gamma. The phases are
    decided in exact rationals of the doubles lw, lh, lb: s2 = K^2 n lw lh (= (K mu)^2) against 1 and against
    (lb / (1 + lb))^2. Returns None outside the hypotheses (not classification, unbalanced counts, groups other than
    one per class, lb = 0, a loss other than one-hot MSE)."""
    from fractions import Fraction

    from solvers.losses import SquaredError

    if (p.kind != "classification" or p.G != p.K or not bool(np.all(p.counts == p.counts[0])) or not p.lb > 0.0
            or not isinstance(p.loss, SquaredError) or p.loss.name != "mse"
            or p.loss.T.shape != (p.K, p.K) or not np.array_equal(p.loss.T, np.eye(p.K))):
        return None
    K, n = p.K, int(p.counts[0])
    lw, lh, lb = Fraction(float(p.lw)), Fraction(float(p.lh)), Fraction(float(p.lb))
    s2 = K * K * n * lw * lh
    c2 = (lb / (1 + lb)) ** 2
    phase = "zero" if s2 >= 1 else ("simplex-etf" if s2 >= c2 else "simplex-etf-shifted")
    mu = math.sqrt(n) * p.lam
    lbf = float(p.lb)
    alpha = max(0.0, 1.0 - K * mu) if phase != "zero" else 0.0
    gamma = max(0.0, 1.0 - K * mu * (1.0 + lbf) / lbf) if phase == "simplex-etf-shifted" else 0.0
    value = ((K - 1) * ((alpha - 1.0) ** 2 / (2 * K) + mu * alpha) + lbf * (1.0 - gamma) ** 2 / (2 * K * (1 + lbf))
             + mu * gamma)
    b0 = 1 / (K * (1 + lb))
    return {"phase": phase, "K2_n_lw_lh": f"{s2.numerator}/{s2.denominator}", "zero_minimiser": s2 >= 1,
            "at_threshold": s2 == 1, "at_shift_threshold": s2 == c2, "alpha": alpha, "gamma": gamma,
            "bias": (1.0 - gamma) / (K * (1 + lbf)), "bias_b0": f"{b0.numerator}/{b0.denominator}", "value": value,
            "rank": 0 if phase == "zero" else (K - 1 if phase == "simplex-etf" else K)}


def _regularised_bias_phase(s: GeneralSolution, value_rtol: float) -> None:
    """MSE, balanced, lb > 0 (in place, after the geometry certificate): zero phase decided in exact rationals ->
    Z = 0 with b0 certified by its own dual bound and reported as the unique minimiser (HOW_EXACT_PHASE_LB); other
    phases: the geometry stays a statement about the minimiser only when the proven radius is below the centre's
    norm (the minimiser is then nonzero; near the threshold float64 cannot tell a vanishing ETF from zero)."""
    p = s.problem
    ex = regularised_bias_mse_phase(p)
    if ex is None:
        return
    s.uniqueness["regularised_bias_phase"] = ex
    if ex["zero_minimiser"]:
        X0, b0 = np.zeros((p.K, p.K)), np.full(p.K, 1.0 / (p.K * (1.0 + float(p.lb))))
        with blas_threads(0):
            cc = certificate(p, X0, b0)
        ok = _within(cc.gap, _tolerance(ex["value"], value_rtol, VALUE_ATOL))
        ex["zero_certificate_gap"] = cc.gap
        s.diagnostics.append(f"regularised bias: exact rationals put K^2 n lw lh = {ex['K2_n_lw_lh']} >= 1: Z = 0 "
                             f"(b0 = {ex['bias_b0']}) is the unique minimiser"
                             + ("" if ok else f", but its certificate's gap {cc.gap:.3g} is not within tolerance"))
        if ok:
            s.geometry_how = HOW_EXACT_PHASE_LB
            s.geometry = geometry(p, X0, b0)
            s.geometry["exact_phase"] = ex
        else:
            s.geometry_how = None
        return
    enc = s.enclosure
    if s.geometry_how is not None and not (enc and enc.get("ok") and enc["radius"] < enc["center_norm"]):
        s.geometry_how = None
        s.diagnostics.append("regularised bias: the proven radius does not exclude Z* = 0 (a vanishing simplex ETF), "
                             "so the geometry is a measurement at the candidate only")


def zero_phase_closed_form(p: GeneralUFM, rtol: float = PHASE_RTOL) -> dict:
    """The balanced closed form in its zero phase (Z = 0: value w log K for the CE-type losses, (K - 1)/(2K) for
    MSE, independent of lambda), taken where the loss's own formula is on the zero side: at lam (1 + rtol)
    (:func:`near_phase_threshold` has checked that it is there)."""
    cf = p.loss.closed_form(p.K, int(p.counts[0]), p.lam * (1.0 + rtol))
    if cf is None or not cf.get("trivial"):
        raise AssertionError("the closed form at lam (1 + rtol) is not in its zero phase")
    return cf


def von_neumann_rank_d(sv: np.ndarray, thr: float, lam: float, N: int, m: int, d: int) -> float:
    """A proven lower bound (float allowances included) of min over rank(Z) <= d of (1/(2N))||Z - Yc||_F^2 +
    lam ||Z||_*, Yc with singular values ``sv`` (sorted, descending): by von Neumann's trace inequality
    ||Z - Yc||^2 >= sum_j (z_j - s_j)^2, so the problem is separable in z with at most d nonzeros and keeps the d
    largest soft-thresholded values (docs/ufm_general.md, 'Regression')."""
    head, tail = sv[:d], sv[d:]
    low = float(np.sum(np.minimum(head, thr) ** 2) / (2 * N) + lam * np.sum(np.maximum(head - thr, 0.0))
                + np.sum(tail ** 2) / (2 * N))
    s_err = 4.0 * max(N, m) * UNIT_ROUNDOFF * float(sv[0]) if sv.size else 0.0
    return low - 16 * (N + m) * UNIT_ROUNDOFF * abs(low) - float(np.sum(sv / N + lam)) * s_err


def plan(p: GeneralUFM, starts: int) -> GeneralSolution:
    """The route of an instance, decided from its sizes and its loss before any solve: refused (InputError with
    the estimate and the limit) beyond TIME_LIMIT_S / MEMORY_CAP; the balanced closed form when the loss has one
    (inside its hypotheses: the solver's start point and the uniqueness route); the imbalanced-MSE closed form (no
    search); the grouped solver when classes are exchangeable; else the class-reduced factored solver."""
    layout = class_layout(p)
    est = estimate(p, starts, layout)
    if est["bytes"] > MEMORY_CAP or est["seconds"] > TIME_LIMIT_S:
        raise InputError(f"instance too large: estimated {est['bytes'] / 1e9:.2f} GB (limit {MEMORY_CAP / 1e9:.1f} GB) "
                         f"and {work_text(est['seconds'], TIME_LIMIT_S)} (docs/ufm_general.md, 'Budgets')")
    balanced = bool(np.all(p.counts == p.counts[0])) and p.kind == "classification"
    s = GeneralSolution(p, layout, balanced)
    cf = p.loss.closed_form(p.K, int(p.counts[0]), p.lam) if balanced and p.lb == 0.0 else None
    s.closed_form_failed = closed_form_hypotheses(p.loss) if cf is not None else []
    if s.closed_form_failed:
        s.plan.append("balanced closed form outside its hypotheses: " + "; ".join(s.closed_form_failed))
        cf = None  # the package's closed form outside its hypothesis: no prediction
    s.closed_form = cf
    s.mse_closed_form = mse_imbalanced_closed_form(p) if cf is None and not balanced else None
    if s.mse_closed_form is not None:
        s.plan.append("mse-closed-form: imbalanced MSE with one-hot targets and a free bias has a closed form")
    elif layout is not None:
        s.plan.append(f"grouped: {p.K} classes fall into {layout.m} groups of exchangeable classes"
                      + ("; started from the balanced closed form" if cf is not None and layout.m == 1 else ""))
    else:
        s.plan.append("factored: no exchangeable classes (or a loss without a declared symmetry): the class-reduced "
                      "K x G problem" + ("; started from the balanced closed form" if cf is not None else ""))
    return s


def _find_candidate(s: GeneralSolution, starts: int, seed: int, time_budget: float | None) -> None:
    """The candidate of the planned route, cleaned, with its certificate and its geometry (in place)."""
    p, layout, cf, mse_cf = s.problem, s.layout, s.closed_form, s.mse_closed_form
    if mse_cf is not None:
        # imbalanced MSE: singular-value soft thresholding of D^{1/2} P (docs/ufm_general.md, "Imbalanced MSE in
        # closed form"); certified at the exact closed form, no search
        s.X, s.b = mse_cf["X"], mse_cf["b"]
        with blas_threads(0):
            s.certificate = certificate(p, s.X, s.b, grads=mse_cf["grads"])
            s.candidate_geometry = geometry(p, s.X, s.b)
        s.rank = mse_cf["rank"]
        s.run = Solution(s.certificate.upper, "closed form (imbalanced MSE: soft thresholding of D^{1/2} P)", True,
                         0.0, {"X": s.X, "b": s.b}, {"start_values": None})
        s.diagnostics.append("imbalanced MSE: the closed form (singular-value soft thresholding of the class-reduced "
                             "centred targets), certified at that point")
    elif layout is not None:
        # exchangeable classes grouped: the solve and the certificate in O(m^2) per evaluation (m groups)
        init = closed_form_grouped(p, cf) if cf is not None and layout.m == 1 else None
        with blas_threads(0):
            s.run = solve_grouped(p, layout, starts=starts, seed=seed, x_init=init, time_budget=time_budget)
        s.point = clean_grouped(p, s.run.variables["point"], layout)
        s.certificate = certificate_grouped(p, s.point, layout)
        s.rank = s.point.rank(layout)
        if p.K <= EXPAND_MAX:
            s.X, s.b = grouped_full(p, s.point, layout)
            with blas_threads(0):
                s.candidate_geometry = geometry(p, s.X, s.b)
        else:
            s.candidate_geometry = geometry_grouped(p, s.point, layout)
        s.diagnostics.append(f"{p.K} classes in {layout.m} groups of exchangeable classes (equal counts"
                             + (" and weights" if getattr(p.loss, "weighted", False) else "")
                             + "): solved and certified per group (docs/ufm_general.md, 'Grouping exchangeable "
                               "classes')")
    else:
        # the relaxation (rank up to min(K, G)); from the closed form when there is one, plus random starts
        init = closed_form_point(p, cf) if cf is not None else None
        with blas_threads(0):
            s.run = solve_factored(p, rank=min(p.K, p.G), starts=starts, seed=seed, x_init=init,
                                   time_budget=time_budget)
        X, b = s.run.variables["X"], s.run.variables["b"]
        s.X, s.b = clean_candidate(p, X, b), b
        s.certificate = certificate(p, s.X, s.b)
        s.candidate_geometry = geometry(p, s.X, s.b)
        s.rank = s.candidate_geometry["rank"]
    s.value_certificate = s.certificate
    s.candidate = s.run.method
    s.tight = s.rank <= p.d
    s.routes = {"factored": s.run.to_dict()}


def _search_rank_d(s: GeneralSolution, starts: int, seed: int, time_budget: float | None) -> None:
    """d below the rank of the relaxation's optimum: the best point in dimension d against the relaxation's bound
    (in place: ``rank_d``, ``routes``). The rank-d problem is not convex, so grouping does not apply to it: it runs on
    the K x K problem when that fits the budget; imbalanced MSE is decided exactly (von Neumann's trace inequality),
    as in regression."""
    p, cert, mse_cf = s.problem, s.certificate, s.mse_closed_form
    lower = cert.lower_bound
    if mse_cf is not None:
        low_d = von_neumann_rank_d(mse_cf["singular_values"], mse_cf["threshold"], p.lam, p.N, p.K, p.d)
        best = convex_value(p, truncate(s.X, p.d), s.b)
        lower_d = max(low_d, lower)
        s.rank_d = {"route": "von-neumann", "best": best, "lower_d": lower_d, "rank_d_lower_bound": low_d,
                    "certificate": Certificate(lower_d, cert.upper, "rank-d bound (von Neumann) and relaxation dual",
                                               cert.details)}
        s.routes = {}
        s.plan.append("rank-d: von Neumann's trace inequality decides the rank-d problem of the closed form")
        return
    full_est = estimate(p, starts)
    s.routes = {"factored-relaxation": s.run.to_dict()}
    if s.X is None or full_est["bytes"] > MEMORY_CAP or full_est["seconds"] > TIME_LIMIT_S:
        why = (f"skipped: the K x K rank-d search needs {full_est['bytes'] / 1e9:.2f} GB (limit "
               f"{MEMORY_CAP / 1e9:.1f} GB) and {work_text(full_est['seconds'], TIME_LIMIT_S)}")
        s.rank_d = {"route": "skipped", "why": why, "best": None}
        s.plan.append("rank-d: " + why)
        return
    with blas_threads(0):
        sd = solve_factored(p, rank=p.d, starts=starts, seed=seed + 1, x_init=(s.X, s.b), time_budget=time_budget)
    best = convex_value(p, truncate(sd.variables["X"], p.d), sd.variables["b"])
    s.rank_d = {"route": "factored", "best": best, "run": sd}
    s.routes["factored-d"] = sd.to_dict()
    s.plan.append(f"rank-d: factored solve of rank d = {p.d} from the relaxation's candidate")


def collapse_radius(p: GeneralUFM, layout, pt: GroupedPoint, a: int, f_up: float) -> dict:
    """The proven radius r >= dev_a(X*) of every minimiser X* from the dual margin at ``pt`` (None without a
    margin; docs/ufm_general.md, "Minority collapse threshold"). f* <= f_up (a feasible value) is raised by the
    float-evaluation allowance of a value."""
    cm = collapse_margin(p, pt, layout, a)
    up = min(f_up, cm["upper"]) if _finite(cm["upper"]) else f_up
    up += ((2 * (p.K + p.G) + 16) * UNIT_ROUNDOFF + SPECTRAL_SLACK) * abs(up)
    gap = up - cm["lower_bound"] if _finite(cm["lower_bound"]) else math.inf
    delta = cm["delta"]
    radius = gap / delta if _finite(gap, delta) and delta > 0 else None
    return {"radius": radius, "margin_delta": delta, "dual_y_upper": cm["y_upper"],
            "margin_ratio": cm.get("margin_ratio"), "dual_value": cm["lower_bound"], "gap_for_radius": gap,
            "dual_scale_t": cm["scale_t"]}


def minority_evidence(p: GeneralUFM, layout, cert: Certificate, *, seed: int = 0, time_budget: float | None = None,
                      dev_rtol: float = MINORITY_DEV_RTOL) -> dict | None:
    """The evidence about collapse on the smallest-count group a of exchangeable classes (m_a >= 2): the problem
    restricted to collapsed points (beta_a = 0) solved and certified (its own dual bound, ``restricted``), and at
    that collapsed candidate the unrestricted certificate's dual margin delta = lam - |y_a| on the group's sum-zero
    eigenspace, which gives a proven radius r >= dev_a(X*) for every minimiser (``minority_deviation``; polished
    when the radius is not below ``dev_rtol`` x ``scale`` but could be). ``cert``: the unrestricted certificate
    (f* in [lower, upper]). None for losses other than CE-type and one-hot MSE, or without a group of >= 2 classes;
    without a positive target gap q_true - q_other nothing is solved (``restricted`` None)."""
    from solvers.losses import CrossEntropy, SquaredError

    loss = p.loss
    if isinstance(loss, CrossEntropy):
        weights, gap = loss.w, loss.q_true - loss.q_other
    elif isinstance(loss, SquaredError) and loss.exchangeable_key() is not None:
        weights, gap = np.ones(p.K), 1.0
    else:
        return None
    cnt = p.counts[layout.reps]
    cand = [a for a in range(layout.m) if layout.sizes[a] >= 2]
    if not cand:
        return None
    a = min(cand, key=lambda g: (cnt[g], g))
    out = {"group": int(a), "count": int(cnt[a]), "size": int(layout.sizes[a]),
           "weight": float(weights[layout.reps[a]]), "target_gap": gap, "f_star_upper": cert.upper,
           "f_star_lower": cert.lower_bound, "restricted": None}
    if not float(gap) > 0.0:
        return out
    pinned = np.zeros(layout.m, dtype=bool)
    pinned[a] = True
    with blas_threads(0):
        sc = solve_grouped(p, layout, starts=1, seed=seed, pinned=pinned, time_budget=time_budget)
    pt_c = sc.variables["point"]
    cc = certificate_grouped(p, pt_c, layout, pinned=pinned)
    f_up = cert.upper
    # the collapse side: a proven radius from the dual margin at the collapsed candidate (deviation 0 there)
    scale = max(pt_c.nuclear(layout), (float(layout.sizes[a]) - 1.0) * math.sqrt(float(cnt[a])))
    tau = _tolerance(scale, dev_rtol, 0.0)
    rad = collapse_radius(p, layout, pt_c, a, f_up)
    polished = False
    delta0 = rad["margin_delta"]
    if not (rad["radius"] is not None and _within(rad["radius"], tau)) and _finite(delta0, f_up) and delta0 > 0 \
            and MINORITY_POLISH_GAP_FLOOR * abs(f_up) / delta0 <= tau:
        gt = MINORITY_POLISH_GTOL_FACTOR * 1e-11 * max(1e-3, min(1.0, 10 * math.sqrt(p.lam)))
        with blas_threads(0):
            sp = solve_grouped(p, layout, starts=0, x_init=pt_c, pinned=pinned, gtol=gt,
                               max_evals=MINORITY_POLISH_EVALS, time_budget=time_budget, target_gap_rtol=1e-14)
        rad2 = collapse_radius(p, layout, sp.variables["point"], a, f_up)
        polished = True
        if rad2["radius"] is not None and (rad["radius"] is None or rad2["radius"] < rad["radius"]):
            rad = rad2
    out.update(restricted=cc, restricted_point=pt_c, deviation_scale=scale, radius=rad, polished=polished)
    return out


def geometry_halfwidth(gcert: dict) -> float:
    """The widest proven half-width among the reported cosines and the minority measures."""
    hw = [gcert["class_mean_cosines_halfwidth"], gcert["classifier_cosines_halfwidth"]]
    for v in (gcert.get("minority") or {}).values():
        if isinstance(v, list) and len(v) == 2 and all(isinstance(x, float) for x in v):
            hw.append(0.5 * (v[1] - v[0]))
    return max(hw) if all(_finite(h) for h in hw) else math.inf


def polish_for_geometry(p: GeneralUFM, layout, pt, X, b, evals: int):
    """Re-solve from the candidate towards a gap at the float64 floor (``evals`` evaluations, gtol 0: the work
    budget or the certified-gap target ends it): (certificate, grouped point or None, X, b, dual columns), or None.
    Measured (counts 100,50,20,10,5,2,1, lambda 1e-3): the gap 2.8e-11 of the default stop falls to 2.8e-14 in 3000
    evaluations; a gradient tolerance stopped it at 3e-13."""
    try:
        with blas_threads(0):
            if pt is not None:
                sp = solve_grouped(p, layout, starts=0, x_init=pt, gtol=0.0, target_gap_rtol=1e-15, max_evals=evals)
                pt2 = clean_grouped(p, sp.variables["point"], layout)
                c2 = certificate_grouped(p, pt2, layout)
                X2, b2 = grouped_full(p, pt2, layout)
                return c2, pt2, X2, b2, dual_columns_grouped(p, pt2, layout, c2)
            sp = solve_factored(p, rank=min(p.K, p.G), starts=0, x_init=(X, b), max_evals=evals, gtol=0.0)
            X2 = clean_candidate(p, sp.variables["X"], sp.variables["b"])
            c2 = certificate(p, X2, sp.variables["b"])
            return c2, None, X2, sp.variables["b"], dual_columns(p, X2, sp.variables["b"], c2)
    except (InputError, ValueError, np.linalg.LinAlgError):
        return None


def _at_phase_threshold(s: GeneralSolution, value_rtol: float) -> None:
    """The "phase-threshold" uniqueness route (in place): lambda within PHASE_RTOL of the closed form's phase switch.
    The side of rho0 = 1 is decided in exact rationals (:func:`exact_phase`). Zero side (rho0 <= 1, equality
    included): the prediction becomes the zero-phase closed form (whatever side the float formula fell on), Z = 0
    with b0 is certified (its own dual certificate) and reported as the unique minimiser (``geometry_how``
    HOW_EXACT_PHASE; the claims VERIFY it when that certificate's gap is within the value tolerance). Collapse side
    (a simplex ETF of vanishing scale) or no exact decision: the evidence only, nothing about the minimiser."""
    p = s.problem
    ex = exact_phase(p)
    float_phase = "zero" if s.closed_form.get("trivial") else "collapse"
    s.uniqueness = {"route": "phase-threshold", "phase_rtol": PHASE_RTOL, "closed_form_phase": float_phase,
                    "exact": ex}
    if ex is None or not ex["zero_minimiser"]:
        if ex is not None:
            s.diagnostics.append(f"phase threshold: exact rationals put rho0^2 = {ex['rho0_squared']} > 1 (a simplex "
                                 "ETF of vanishing scale is the minimiser), which float64 cannot resolve")
        return
    if float_phase != "zero":
        s.closed_form = zero_phase_closed_form(p)
        s.diagnostics.append("phase threshold: the float closed form fell on the collapse side; exact rationals put "
                             "rho0 <= 1, so the prediction is the zero-phase closed form")
    Xc, bc = closed_form_point(p, s.closed_form)  # X = 0, b0 = 0 (CE-type) or 1/K (MSE)
    with blas_threads(0):
        cc = certificate(p, Xc, bc)
    ok = _within(cc.gap, _tolerance(s.closed_form["value"], value_rtol, VALUE_ATOL))
    s.uniqueness.update(closed_form_certificate=cc, confirmed=ok)
    s.diagnostics.append(f"phase threshold: exact rationals put rho0^2 = {ex['rho0_squared']} <= 1"
                         + (" (rho0 = 1 exactly)" if ex["at_threshold"] else "") + ": Z = 0 is the unique minimiser")
    if ok:
        s.geometry_how = HOW_EXACT_PHASE
        s.geometry = geometry(p, Xc, bc)
        s.geometry["exact_phase"] = ex


def _unique_at_closed_form(s: GeneralSolution, value_rtol: float) -> None:
    """Uniqueness at the balanced closed form (in place): its certificate and the conditions of the uniqueness
    theorem (docs/ufm.md); when they are not confirmed (the face tolerances fail when the gradient's rounding is
    large relative to it, lambda ~ 1e-12) and the closed form is not zero, the geometry certificate of the closed
    form's dual point instead. Balanced, exchangeable classes: the unique minimiser is invariant under every class
    permutation, so with 1^T X* = 0 it is c J, a simplex ETF as soon as the proven radius is below the centre's
    norm."""
    p, cf = s.problem, s.closed_form
    Xc, bc = closed_form_point(p, cf)
    cc = certificate(p, Xc, bc)
    uq = uniqueness_conditions(p, Xc, bc)
    ok = uq["valid"] and _within(cc.gap, _tolerance(cf["value"], value_rtol, VALUE_ATOL))
    s.uniqueness = {"route": "closed-form", "conditions": uq, "closed_form_certificate": cc, "confirmed": ok}
    if ok:
        s.geometry_how = HOW_GENERAL_UNIQUE
        s.geometry = geometry(p, Xc, bc)
        return
    if cf.get("trivial") or p.lb != 0.0:
        return
    with blas_threads(0):
        enc = minimiser_enclosure(p, dual_columns(p, Xc, bc, cc), cc.lower_bound, cc.upper)
    nonzero = enc["ok"] and enc["radius"] < enc["center_norm"]
    exchangeable = p.loss.exchangeable_key() is not None
    s.uniqueness.update(enclosure=enc, nonzero=nonzero, exchangeable=exchangeable)
    if enc["ok"] and enc["rank_bound"] <= p.d and nonzero and exchangeable:
        s.geometry_how = (HOW_GEOMETRY_CERTIFICATE + "; balanced exchangeable classes: the unique minimiser is "
                          "invariant under every class permutation, hence c J, nonzero since the radius is below "
                          "the centre's norm: a simplex ETF")
        s.geometry = geometry(p, Xc, bc)


def _geometry_certificate(s: GeneralSolution, geometry_tol: float) -> None:
    """The geometry certificate at the candidate (in place): a proven enclosure of the unique minimiser from the value
    certificate's dual point (docs/ufm_general.md, "Geometry certificate"), and the candidate polished (bounded
    work) for a smaller radius when the widest proven interval is above GEOMETRY_POLISH_FRACTION x
    ``geometry_tol``: the polished candidate, its certificate and geometry replace the first when its radius is
    smaller."""
    p, layout = s.problem, s.layout
    cert, pt, X, b = s.certificate, s.point, s.X, s.b
    with blas_threads(0):  # K x K SVDs: single-threaded BLAS is faster on the shared, loaded 2-core machine
        V = dual_columns_grouped(p, pt, layout, cert) if pt is not None else dual_columns(p, X, b, cert)
        enc = minimiser_enclosure(p, V, cert.lower_bound, cert.upper)
        gcert = geometry_enclosure(p, enc) if enc["ok"] else None
        polish_ok = s.mse_closed_form is None and (pt is not None
                                                   or float(p.K) * p.G * min(p.K, p.G) <= GEOMETRY_POLISH_MAX_KGR)
        if gcert is not None and polish_ok and geometry_halfwidth(gcert) > GEOMETRY_POLISH_FRACTION * geometry_tol:
            # the radius grows like sqrt(gap): polish the candidate (bounded work) for a smaller gap
            used = int((s.run.diagnostics or {}).get("evaluations") or 0)
            pol = polish_for_geometry(p, layout, pt, X, b,
                                      min(GEOMETRY_POLISH_EVALS, max(GEOMETRY_POLISH_MIN_EVALS, used)))
            if pol is not None and pol[0].gap < cert.gap:
                cert2, pt2, X2, b2, V2 = pol
                enc2 = minimiser_enclosure(p, V2, cert2.lower_bound, cert2.upper)
                if enc2["ok"] and enc2["radius"] < enc["radius"]:
                    enc, s.certificate, s.point, s.X, s.b = enc2, cert2, pt2, X2, b2
                    gcert = geometry_enclosure(p, enc)
                    s.candidate_geometry = geometry(p, s.X, s.b)
                    s.geometry = s.candidate_geometry
                    s.diagnostics.append(f"geometry certificate: candidate polished for a smaller radius (certified "
                                         f"gap {s.certificate.gap:.3g})")
    s.enclosure, s.intervals = enc, gcert
    s.uniqueness = {"route": "enclosure", "enclosure": enc,
                    "structural": structural_uniqueness(p) if not enc["ok"] else None}
    if gcert is not None and enc["rank_bound"] <= p.d:
        s.geometry_how = HOW_GEOMETRY_CERTIFICATE
        geo = dict(s.candidate_geometry)
        for key in ("class_mean_cosines", "classifier_cosines", "class_mean_norms", "classifier_norms"):
            geo[key] = gcert[key]
        geo["geometry_enclosure"] = {k: v for k, v in gcert.items() if not k.startswith("_")}
        geo["enclosure"] = {k: v for k, v in enc.items() if k != "center"}
        if "minority" in gcert:
            geo["minority_intervals"] = gcert["minority"]
        mci = gcert["_intervals"]["mean_cos"]
        wci = gcert["_intervals"]["cls_cos"]
        geo["_cosines_full"] = (0.5 * (mci[0] + mci[1]), 0.5 * (wci[0] + wci[1]))
        s.geometry = geo


def regression_residual(Y: np.ndarray, cf: dict) -> np.ndarray:
    """The gradient of the regression closed form, Z + b 1^T - Y^T = -U min(s, N lam) V^T (m x N), from the SVD of
    the centred targets: computing it as a difference cancels to ~u absolute per entry, more than the value's
    tolerance at lambda <= 1e-9."""
    Yc = (Y - Y.mean(axis=0)).T
    Uy, sy, Vty = np.linalg.svd(Yc, full_matrices=False)
    return -(Uy * np.minimum(sy, cf["threshold"])) @ Vty


def regression_geometry(p: GeneralUFM, cf: dict) -> dict:
    """The geometry of the regression optimum Z* (unique by strict convexity): W W^T = sqrt(lh/lw) (Z Z^T)^{1/2} =
    q U S U^T from the thin SVD of Z (m x N), never an m x m matrix unless it is printed (m <= 50; an audit saw
    9.5 GB for m = 20 000 targets with the m x m square root)."""
    Z = cf["Z"]
    m = Z.shape[0]
    q = math.sqrt(p.lh / p.lw)
    U_, s_, _ = np.linalg.svd(Z, full_matrices=False)
    nrm = np.sqrt(np.clip(q * ((U_ * U_) @ s_), 0.0, None))
    C = _cos(q * (U_ * s_) @ U_.T)[1] if m <= 50 else None
    WW = q * (U_ * s_) @ U_.T if m <= 50 else None
    return {"classifier_gram": WW.tolist() if WW is not None else None, "classifier_norms": nrm.tolist()[:1000],
            "classifier_cosines": C.tolist() if C is not None else None, "feature_rank": cf["rank"],
            "note": "W W^T = sqrt(lh/lw) (Z Z^T)^{1/2}, H^T H = sqrt(lw/lh) (Z^T Z)^{1/2}: features lie in the "
                    "rank-r subspace of the top centred-target directions (Andriopoulos et al. 2024)"}


#: The factored route of regression runs up to this many target entries (N m).
REGRESSION_FACTORED_MAX = 200_000


def _solve_regression(p: GeneralUFM, Y: np.ndarray, *, seed: int, factored: bool, value_rtol: float) -> GeneralSolution:
    """Regression (docs/ufm_general.md, "Regression"): the closed form by singular-value soft thresholding of the
    centred targets, certified at the closed form (the dual point from the SVD residual, or the plain gradient when
    its bound is higher), an independent factored solve (``factored``, N m <= REGRESSION_FACTORED_MAX), the geometry
    of the unique optimum. d below the closed form's rank: its truncation to rank d, bounded by von Neumann's trace
    inequality (``rank_d``)."""
    t0 = time.perf_counter()
    s = GeneralSolution(p)
    cf = regression_closed_form(Y, p.lw, p.lh)
    N, m = Y.shape
    s.closed_form, s.rank, s.tight = cf, cf["rank"], cf["rank"] <= p.d
    # the residual of the closed form from the SVD, -U min(s, N lam) V^T: computing Z + b - Y in floats cancels to
    # ~u absolute per entry, which at lambda ~ 1e-9 and below is larger than the gap the value needs
    cert = certificate(p, cf["Z"], cf["b"], grads=regression_residual(Y, cf))
    if not s.tight:
        # the rank-d problem is decided by von Neumann's trace inequality: for rank Z <= d,
        # ||Z - Yc||^2 >= sum_j (z_j - s_j)^2 (sorted singular values), so the objective is >= the separable problem
        # in z with at most d nonzeros, whose minimum keeps the d largest: a proven lower bound of the rank-d optimum
        best = convex_value(p, truncate(cf["Z"], p.d), cf["b"])
        low_d = von_neumann_rank_d(cf["singular_values"], cf["threshold"], p.lam, N, m, p.d)
        lower_d = max(low_d, cert.lower_bound)
        s.certificate = s.value_certificate = cert
        s.rank_d = {"route": "von-neumann", "best": best, "lower_d": lower_d, "rank_d_lower_bound": low_d,
                    "certificate": Certificate(lower_d, cert.upper, "rank-d bound (von Neumann) and relaxation dual",
                                               cert.details)}
        s.plan.append(f"rank-d: d = {p.d} below the closed form's rank {cf['rank']}: its truncation to rank d")
        s.seconds = time.perf_counter() - t0
        return s
    cert_plain = certificate(p, cf["Z"], cf["b"])
    if cert_plain.lower_bound > cert.lower_bound:
        cert = cert_plain
    s.certificate = s.value_certificate = cert
    s.X, s.b = cf["Z"], cf["b"]
    s.plan.append("regression closed form (singular-value soft thresholding), certified at that point")
    if factored and N * m <= REGRESSION_FACTORED_MAX:
        with blas_threads(0):
            s.run = solve_factored(p, rank=min(p.d, m, N), starts=1, seed=seed)
        s.routes["factored"] = s.run.to_dict()
        if s.run.value < cert.upper - _tolerance(cert.upper, value_rtol, VALUE_ATOL):
            s.diagnostics.append("the factored solver found a lower value than the closed form")
    s.uniqueness = {"route": "strict-convexity"}
    s.geometry = regression_geometry(p, cf)
    s.geometry_how = "unique Z* (strict convexity) at the exact closed form"
    s.seconds = time.perf_counter() - t0
    return s


def estimate_value(p: GeneralUFM, starts: int = 1) -> float:
    """Estimated seconds of ``solve(p, evidence="value")`` (0 when a balanced closed form is certified directly)."""
    balanced = bool(np.all(p.counts == p.counts[0])) and p.kind == "classification"
    if balanced and p.lb == 0.0 and p.loss.closed_form(p.K, int(p.counts[0]), p.lam) is not None \
            and not closed_form_hypotheses(p.loss):
        return 0.0
    layout = class_layout(p)
    if layout is None:
        return estimate(p, starts)["seconds"]
    m = float(layout.m)
    return starts * GROUPED_EVALS * (GROUPED_EVAL_OVERHEAD + GROUPED_FLOPS_M3 * m ** 3 / FLOPS_PER_SECOND)


def _solve_value(p: GeneralUFM, starts: int, seed: int, time_budget: float | None) -> GeneralSolution:
    """One certified value (``evidence="value"``; rows of ``table ufm``): balanced classes with a closed form: the
    candidate is the closed form's point itself (one group, O(K) work); otherwise the grouped (or, without
    exchangeable classes, the class-reduced) solver from random starts, refused beyond TIME_LIMIT_S by
    :func:`estimate_value`. Imbalanced counts: the geometry at the candidate (its minority measures are a
    measurement, not a statement about every minimiser). No rank, no minimiser evidence."""
    t0 = time.perf_counter()
    balanced = bool(np.all(p.counts == p.counts[0])) and p.kind == "classification"
    s = GeneralSolution(p, class_layout(p), balanced)
    cf = p.loss.closed_form(p.K, int(p.counts[0]), p.lam) if balanced and p.lb == 0.0 else None
    s.closed_form_failed = closed_form_hypotheses(p.loss) if cf is not None else []
    s.closed_form = None if s.closed_form_failed else cf  # outside its hypothesis: the certified value is the value
    layout = s.layout
    if s.closed_form is not None and layout is not None and layout.m == 1:
        s.point = closed_form_grouped(p, s.closed_form)
        s.certificate = certificate_grouped(p, s.point, layout)
        s.candidate = "closed form's point"
    else:
        est = estimate_value(p, starts)
        if est > TIME_LIMIT_S:
            raise InputError(f"instance too large for a certified value: {work_text(est, TIME_LIMIT_S)} "
                             "(docs/ufm_general.md, 'Budgets')")
        with blas_threads(0):
            if layout is not None:
                s.run = solve_grouped(p, layout, starts=starts, seed=seed, time_budget=time_budget)
                s.point = clean_grouped(p, s.run.variables["point"], layout)
                s.certificate = certificate_grouped(p, s.point, layout)
            else:
                s.run = solve_factored(p, rank=min(p.K, p.G), starts=starts, seed=seed, time_budget=time_budget)
                s.X, s.b = clean_candidate(p, s.run.variables["X"], s.run.variables["b"]), s.run.variables["b"]
                s.certificate = certificate(p, s.X, s.b)
        s.candidate = s.run.method
        s.routes = {"factored": s.run.to_dict()}
    s.plan.append(f"value: {s.candidate}")
    s.value_certificate = s.certificate
    if p.kind == "classification" and np.unique(p.counts).size > 1:
        s.geometry = geometry_grouped(p, s.point, layout) if s.point is not None else geometry(p, s.X, s.b)
    s.seconds = time.perf_counter() - t0
    return s


def _wall_budget(time_budget) -> float | None:
    """``time_budget`` (a wall-clock safety net in seconds): None or a finite number > 0. 0 and -1 stopped every
    solve at once and the report stated a rank the unsolved candidate had (3 for K = 3 softmax classes, whose optimum
    has rank <= K - 1) with "the relaxation is not tight"; NaN ran without a net."""
    if time_budget is None:
        return None
    return as_float("time_budget", time_budget, positive=True)


def solve(p: GeneralUFM, *, starts: int = 2, seed: int = 0, time_budget: float | None = None,
          minority: bool = True, value_rtol: float = VALUE_RTOL, geometry_tol: float = GEOMETRY_TOL,
          minority_dev_rtol: float = MINORITY_DEV_RTOL, targets: np.ndarray | None = None,
          factored: bool = True, evidence: str = "full") -> GeneralSolution:
    """The any-loss engine on one instance, in one call (docs/ufm_general.md): the route planned from the sizes
    (:func:`plan`; InputError beyond the budget), the candidate found, cleaned and certified (a proven lower bound
    and a feasible value), then either the search in dimension d (when d is below the candidate's rank) or the
    evidence about the minimiser: the minority-collapse evidence (imbalanced exchangeable classes, ``minority``),
    uniqueness (structural, at the closed form, or by the geometry certificate) and the geometry of the minimiser
    (proven intervals where certified). Budgets are work counts (``starts`` random starts, the solvers' evaluation
    budgets; ``time_budget`` is only a wall-clock safety net), so the result is the same at any machine load.
    ``value_rtol``, ``geometry_tol`` and ``minority_dev_rtol`` are the accuracy the caller's statements need: they
    decide which further evidence is computed (a fallback enclosure, a polish), never a verdict. Regression
    (``p.kind == "regression"``) takes its targets Y (N x m) as ``targets`` (:func:`_solve_regression`; ``factored``:
    run the independent factored route). ``evidence="value"``: the certified value only (:func:`_solve_value`, the
    rows of ``table ufm``). Returns a :class:`GeneralSolution`."""
    if evidence not in ("full", "value"):
        raise InputError(f"evidence must be 'full' or 'value', got {evidence!r}")
    if not isinstance(p, GeneralUFM):
        raise InputError(f"p must be a GeneralUFM instance (solvers.ufm_general.classification(...)), got "
                         f"{type(p).__name__}")
    time_budget = _wall_budget(time_budget)
    if evidence == "value":
        return _solve_value(p, starts, seed, time_budget)
    if p.kind == "regression":
        if targets is None:
            raise InputError("targets (an N x m array) are needed to solve a regression problem")
        return _solve_regression(p, np.asarray(targets, dtype=float), seed=seed, factored=factored,
                                 value_rtol=value_rtol)
    t0 = time.perf_counter()
    s = plan(p, starts)
    _find_candidate(s, starts, seed, time_budget)
    s.geometry = s.candidate_geometry
    if not s.tight:
        _search_rank_d(s, starts, seed, time_budget)
        s.seconds = time.perf_counter() - t0
        return s
    if minority and s.layout is not None and not s.balanced:
        s.minority = minority_evidence(p, s.layout, s.certificate, seed=seed, time_budget=time_budget,
                                       dev_rtol=minority_dev_rtol)
    if s.X is None:
        s.uniqueness = {"route": "structural", "structural": structural_uniqueness(p)}
    elif s.closed_form is not None and near_phase_threshold(p):
        # within PHASE_RTOL of the phase threshold float64 cannot tell a vanishing simplex ETF from the zero
        # minimiser: the closed form's phase may be the wrong one, so it proves nothing about the minimiser; the
        # exact rationals of the doubles decide the side (rho0 <= 1: Z = 0 is the unique minimiser)
        _at_phase_threshold(s, value_rtol)
    elif s.closed_form is not None:
        _unique_at_closed_form(s, value_rtol)
    else:
        _geometry_certificate(s, geometry_tol)
        if p.lb > 0.0:
            _regularised_bias_phase(s, value_rtol)
    s.cosines = s.geometry.pop("_cosines_full", (None, None))
    s.candidate_geometry.pop("_cosines_full", None)
    s.routes = {"factored": s.run.to_dict()}
    s.seconds = time.perf_counter() - t0
    return s
