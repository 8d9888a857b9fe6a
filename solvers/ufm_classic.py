"""The classic (balanced CE / MSE) UFM engine's one entry point (docs/ufm.md, docs/DEVELOPING.md).

:func:`solve_instance` finds the truth about one ``theory.ufm.UFMInstance`` in one call and returns a
:class:`ClassicSolution`: numbers and evidence, never verdicts. It plans the routes from size estimates
before anything is allocated (:func:`plan_routes`: a route asked for explicitly beyond the memory or work
limit is refused, ``auto`` skips it and says why), then runs them:

- closed form (``theory.ufm``) in class coordinates, O(k^2) memory: the point Z* and its KKT dual
  certificate (a proven lower bound), the phase ratio rho0, the uniqueness certificate (docs/ufm.md,
  "Uniqueness") and the SVD factorization of Z*, independent of the ETF constructors; the geometry
  evidence measured there (class-mean classification, self-duality, bias stationarity);
- convex nuclear-norm program (cvxpy, small instances; auxiliary);
- factored nonconvex solver (L-BFGS from several random starts), independent of the theory: its value is a
  feasible value, its point decides nothing (in the zero phase it comes with a proven radius).

The certificate reported is the valid one with the largest lower bound. The claims layer
(``proofs_check.claims.ufm.check_instance``) asks once and only states and judges.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from solvers import ufm as S
from solvers import ufm_general as SG
from solvers.common import REFERENCE_FLOPS, Certificate, Solution, blas_threads, work_text
from theory import geometry as G
from theory import ufm as T
from theory._validate import InputError, as_int

#: Every instance must finish within 2 minutes on 2 cores: routes are planned so that their estimated
#: time stays below this, and the factored solver gets the remainder as its wall-clock budget.
TIME_LIMIT_S = 100.0
#: ``auto`` runs the convex route only below this estimated time (it is auxiliary).
AUTO_CONVEX_SECONDS = 10.0
#: Default memory limit: min(0.8 * available memory, this).
MEMORY_CAP = 2.5e9
METHODS = ("auto", "closed-form", "convex", "factored")
#: Defaults of the tolerances the engine reports against (the classic claims pass their own, equal values):
#: the value tolerance of the "not at the certified optimum" diagnostic and the relative band around rho0 = 1
#: inside which float64 cannot tell a vanishing simplex ETF from the zero minimiser.
VALUE_RTOL = 1e-9
VALUE_ATOL = 1e-30
PHASE_RTOL = 1e-9
#: Points with more feature entries than this get no geometry (the NC metrics copy the features).
GEOMETRY_MAX_ENTRIES = 5_000_000
HOW_RADIUS = "||Z - Z*||_F <= ||Z||_* <= gap / (lam (1 - rho0)) (docs/ufm.md, 'Radius')"


def _fmt(x, digits: int = 8) -> str:
    if x is None:
        return "null"
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.{digits}g}"
    return str(x)


def memory_limit(max_memory: float | None = None) -> float:
    """The memory budget in bytes: ``max_memory`` when given, else min(0.8 * available memory, 2.5 GB)."""
    if max_memory is not None:
        if isinstance(max_memory, bool) or not SG._finite(max_memory) or float(max_memory) <= 0:
            raise InputError(f"max_memory must be a finite number of bytes > 0, got {max_memory!r}")
        return float(max_memory)
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = float(line.split()[1]) * 1024.0
                    break
    except OSError:
        pass
    return min(0.8 * avail, MEMORY_CAP) if avail else MEMORY_CAP


def _gb(x: float) -> str:
    return f"{x / 1e9:.3g} GB"


def plan_routes(inst: T.UFMInstance, method: str, starts: int, limit_bytes: float,
                plan: list | None = None) -> tuple[list[str], list[str]]:
    """Which routes run, from size estimates made before anything is allocated (solvers.ufm.estimate).

    A route the user asked for explicitly that exceeds the memory limit or the time limit is refused
    (InputError with the estimate and the limit); ``auto`` skips it and says so in the diagnostics.
    Returns (routes, diagnostics); ``plan``, when given, receives one line per route: run or not, and why.
    """
    fam = f"ufm-{inst.loss}"
    size = f"k = {inst.k}, n = {inst.n}, d = {inst.d}"
    routes, diags = [], []
    plan = [] if plan is None else plan
    failed = inst.hypotheses()

    def fits(e, seconds_limit):
        return e["bytes"] <= limit_bytes and e["seconds"] <= seconds_limit

    def why(e, seconds_limit):
        return (f"estimated {_gb(e['bytes'])} and {work_text(e['seconds'], seconds_limit)}; limits "
                f"{_gb(limit_bytes)} and {seconds_limit * REFERENCE_FLOPS:.3g} flop-equivalents")

    if not failed:
        e = S.estimate(inst, "closed-form")
        if not fits(e, TIME_LIMIT_S):
            raise InputError(f"{fam} ({size}): too large: the class-reduced closed-form check (certificate, "
                             f"uniqueness, geometry) needs {why(e, TIME_LIMIT_S)} (see --max-memory)")
        if method in ("auto", "closed-form"):
            routes.append("closed-form")
        plan.append("closed-form: the hypotheses hold; its class-reduced certificate always runs"
                    + ("" if method in ("auto", "closed-form") else f" (its point is not a route of --method {method})"))
    else:
        plan.append(f"closed-form: not run ({'; '.join(failed)})")
    if method == "convex" or (method == "auto" and not failed):
        e = S.estimate(inst, "convex")
        if method == "convex":
            if not fits(e, TIME_LIMIT_S / 2):
                raise InputError(f"{fam} ({size}): --method convex is limited to small instances: the conic "
                                 f"program needs {why(e, TIME_LIMIT_S / 2)}; use --method closed-form or factored")
            routes.append("convex")
            plan.append("convex: asked for")
        elif fits(e, AUTO_CONVEX_SECONDS):
            routes.append("convex")
            plan.append(f"convex: auto, its estimate within {_gb(limit_bytes)} and "
                        f"{AUTO_CONVEX_SECONDS * REFERENCE_FLOPS:.3g} flop-equivalents")
        else:
            diags.append(f"convex route skipped ({why(e, AUTO_CONVEX_SECONDS)})")
            plan.append(diags[-1])
    if method in ("auto", "factored"):
        e = S.estimate(inst, "factored", starts)
        if fits(e, TIME_LIMIT_S):
            routes.append("factored")
            plan.append(f"factored: {'asked for' if method == 'factored' else 'auto'}, {starts} start(s)")
        elif method == "factored":
            raise InputError(f"{fam} ({size}, starts = {starts}): the factored solver needs "
                             f"{why(e, TIME_LIMIT_S)}; use fewer starts, --method closed-form, or --max-memory")
        else:
            diags.append(f"factored route skipped ({why(e, TIME_LIMIT_S)})")
            plan.append(diags[-1])
    return routes, diags


def classify_scale_free(gram: np.ndarray) -> G.GeometryClass:
    """Classify the class-mean Gram of the closed form's Z*: "zero" exactly when it is 0 (the zero phase
    builds Z* = 0 exactly; which phase holds is decided by rho0, not by a size threshold), otherwise the
    Gram normalised to Frobenius norm 1. An absolute zero threshold would call a true ETF "zero" when the
    means are small (measured: lw = 1e-11, lh = 4e7 gives means of norm ~1e-5 and a Gram of ~1e-10)."""
    scale = float(np.linalg.norm(gram))
    if not scale > 0.0:
        return G.classify_gram(gram)
    return G.classify_gram(gram / scale)


def point_geometry(inst: T.UFMInstance, W, Mu, b, *, labels=None, H=None) -> dict:
    """Geometry of a point given by W (k x r), class means Mu (r x k) and b (collapsed when H is None)."""
    y = np.arange(inst.k) if H is None else labels
    feats = Mu if H is None else H
    gram = Mu.T @ Mu
    cls = classify_scale_free(gram) if H is None else G.classify_gram(gram)
    metrics = G.nc_metrics(feats, y, W, b).to_dict()
    rho = math.sqrt(inst.lw / (inst.n * inst.lh))
    nmu = float(np.linalg.norm(Mu))
    self_dual = float(np.linalg.norm(Mu - rho * W.T) / nmu) if nmu > 0 else None
    return {"classification": cls.classification, "distance_etf": cls.distance_etf, "distance_of": cls.distance_of,
            "class_mean_cosines": G.cosine_matrix(Mu), "metrics": metrics, "self_duality_error": self_dual,
            "bias_spread": float(np.ptp(b)) if b.size else 0.0, "bias_mean": float(np.mean(b)),
            "class_mean_norm": float(np.mean(np.linalg.norm(Mu, axis=0)))}


#: Classes up to which the exact phase decision also forms V V^T in rational arithmetic (O(k^3) Fractions); above
#: it the identity V V^T = I - J/k (J^2 = k J) is used as derived.
EXACT_PHASE_MATRIX_MAX_K = 24


def exact_phase(inst: T.UFMInstance) -> dict:
    """rho0 <= 1 decided in exact rational arithmetic (used where float64 puts rho0 within the band around 1).

    The instance is its doubles (docs/rigorous.md, "Convert exactly"): lw, lh enter as the exact rationals of
    the doubles. At Z = 0 with the optimal bias (CE: b0 = 0, softmax = 1/k; MSE: b0 = 1/k) the gradient in class
    coordinates is Gs = (sqrt(n)/N) V with V = (1/k) 1 1^T - I (column j: p0 - e_j), so ||grad L(0)||_2^2 =
    (n/N^2) lambda_max(V V^T) = n/N^2 (V V^T = I - J/k, the projector orthogonal to 1: eigenvalues 1 and 0),
    and rho0^2 = n / (N^2 lw lh) exactly. Z = 0 is a minimiser iff rho0 <= 1 (KKT at 0); it is the unique one
    also at rho0 = 1: another minimiser Z' would make L + lam ||.||_* constant on the segment [0, Z'], so both
    convex terms affine there; CE and MSE are affine along a logit direction only if it adds a constant to each
    column (CE) or is zero (MSE), which leaves L unchanged while lam t ||Z'||_* grows unless Z' = 0.

    Returns {"rho0_squared": str (an exact rational), "zero_minimiser": bool, "at_threshold": bool,
    "matrix_checked": bool (V V^T formed exactly, k <= EXACT_PHASE_MATRIX_MAX_K)}, or None for MSE with a decayed
    bias (b0 is not 1/k there)."""
    from fractions import Fraction

    k, n, N = inst.k, inst.n, inst.N
    if inst.loss != "ce" and float(getattr(inst, "lb", 0.0) or 0.0) != 0.0:
        return None  # a decayed MSE bias moves b0 off 1/k: the gradient at 0 is another matrix
    lw, lh = Fraction(float(inst.lw)), Fraction(float(inst.lh))
    checked = False
    if k <= EXACT_PHASE_MATRIX_MAX_K:
        p0 = Fraction(1, k)  # CE: softmax(0 + b0) with b0 = 0; MSE: b0 = 1/k
        V = [[p0 - (1 if i == j else 0) for j in range(k)] for i in range(k)]
        for i in range(k):
            for j in range(k):
                vv = sum(V[i][t] * V[j][t] for t in range(k))
                if vv != (1 if i == j else 0) - Fraction(1, k):
                    raise AssertionError(f"exact phase: (V V^T)[{i},{j}] = {vv} is not that of I - J/k")
        checked = True
    from solvers.rigorous.ufm import balanced_phase  # the same rationals --rigorous decides the phase with

    phase, rho0_sq = balanced_phase(k, n, inst.lw, inst.lh)
    if rho0_sq != Fraction(n, N * N) / (lw * lh):
        raise AssertionError(f"exact phase: rho0^2 = {rho0_sq} is not n / (N^2 lw lh)")
    return {"rho0_squared": f"{rho0_sq.numerator}/{rho0_sq.denominator}", "zero_minimiser": rho0_sq <= 1,
            "at_threshold": rho0_sq == 1, "matrix_checked": checked}


def phase_name(rho0: float, phase_rtol: float = PHASE_RTOL) -> str:
    """"zero" (rho0 <= 1 - rtol: Z* = 0 is the unique minimiser), "collapse" (rho0 >= 1 + rtol), "threshold"
    (within the band, where float64 cannot tell which) or "unknown" (rho0 not finite)."""
    if not SG._finite(rho0):
        return "unknown"
    if rho0 <= 1.0 - phase_rtol:
        return "zero"
    if rho0 >= 1.0 + phase_rtol:
        return "collapse"
    return "threshold"


@dataclass
class ClassicSolution:
    """What :func:`solve_instance` found for one instance: numbers and evidence, never verdicts.

    ``hypotheses_failed``: the closed form's failed hypotheses (then no closed form, no minimiser evidence).
    ``plan``: one line per route, run or not and why; ``routes_run`` the routes run; ``routes`` their
    reports (the report's "routes"); ``feasible``: the feasible value of each route that counts (the convex
    value only when d >= k - 1); ``attained`` the least of them. ``certificates``: every certificate built
    (the closed form's, the convex point's, the factored candidate's); ``certificate``: the valid one with
    the largest lower bound (``Certificate.method`` says how). ``closed_form``: Zc, b (class logits and bias
    of Z*), its certificate ``cert``, ``phase`` (rho0, the gradient norm at zero), ``uniq`` (the uniqueness
    certificate), the SVD factorization ``W``, ``Mu``. ``phase``: :func:`phase_name` of rho0.
    ``minimiser``: the evidence measured at Z* (``classification``: a GeometryClass of its class means,
    scale-free; ``self_duality_error`` (CE, collapse phase); ``bias``: b*, its spread or offset from 1/k and the
    stationarity residual with the gradient's scale). ``geometry``: the report's geometry (at Z* when the
    hypotheses hold, with ``solver_points``: each solver point's gap to the proven bound, in the zero phase its
    proven radius); ``diagnostics``: skipped routes, solver warnings, points off the certified optimum.
    ``live``: the objects ``--rigorous`` bounds (the instance as it is)."""

    inst: T.UFMInstance
    method: str
    hypotheses_failed: list = field(default_factory=list)
    plan: list = field(default_factory=list)
    routes_run: list = field(default_factory=list)
    routes: dict = field(default_factory=dict)
    feasible: dict = field(default_factory=dict)
    attained: float | None = None
    certificates: list = field(default_factory=list)
    certificate: Certificate | None = None
    closed_form: dict | None = None
    phase: str | None = None
    minimiser: dict | None = None
    convex: Solution | None = None
    factored: Solution | None = None
    geometry: dict = field(default_factory=dict)
    diagnostics: list = field(default_factory=list)
    live: dict = field(default_factory=dict)

    @property
    def lower_bound(self) -> float | None:
        return self.certificate.lower_bound if self.certificate else None

    @property
    def best_route(self) -> tuple[str, dict] | None:
        """The route with the least feasible value and its report, or None."""
        rs = {k: v for k, v in self.routes.items() if k in self.feasible}
        return min(rs.items(), key=lambda kv: kv[1]["value"]) if rs else None

    @property
    def converged(self) -> bool:
        return all(r.get("converged", True) for r in self.routes.values())

    @property
    def point(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(W, H, b): the certified minimiser's SVD factorization (H: its class means per sample) when the
        hypotheses hold; else the factored solver's point; None when neither exists."""
        if self.closed_form is not None and self.closed_form["W"] is not None:
            cf = self.closed_form
            return cf["W"], cf["Mu"][:, self.inst.labels()], cf["b"]
        if self.factored is not None:
            v = self.factored.variables
            return v["W"], v["H"], v["b"]
        return None


def solve_instance(inst: T.UFMInstance, *, method: str = "auto", starts: int = 3, seed: int = 0,
                   backend: str = "numpy", device: str | None = None, dtype: str = "float64",
                   max_memory: float | None = None, value_rtol: float = VALUE_RTOL, value_atol: float = VALUE_ATOL,
                   phase_rtol: float = PHASE_RTOL, evidence: str = "all") -> ClassicSolution:
    """Solve and certify one classic UFM instance: the routes (planned from size estimates, :func:`plan_routes`;
    ``max_memory`` bytes replaces the default limit min(0.8 * available memory, 2.5 GB)), the best certificate,
    the phase, the uniqueness certificate and the geometry evidence at Z*, each solver point's gap and radius.
    ``evidence="value"``: only the values and certificates (the closed form's certificate and point value, no
    phase, uniqueness, factorization or geometry). Bad input (method, starts, seed, max_memory, evidence, an
    instance too large for the route asked for): InputError."""
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if evidence not in ("all", "value"):
        raise InputError(f"evidence must be 'all' or 'value', got {evidence!r}")
    starts = as_int("starts", starts, minimum=1)
    seed = as_int("seed", seed, minimum=0)
    s = ClassicSolution(inst=inst, method=method, hypotheses_failed=inst.hypotheses(), live={"instance": inst})
    s.routes_run, s.diagnostics = plan_routes(inst, method, starts, memory_limit(max_memory), s.plan)
    if not s.hypotheses_failed:
        _closed_form(s, value_only=evidence == "value")
    if "convex" in s.routes_run:
        _convex(s)
    if "factored" in s.routes_run:
        _factored(s, starts, seed, backend, device, dtype)
    s.attained = min(s.feasible.values()) if s.feasible else None
    valid = [c for c in s.certificates if c.details.get("valid", True) and SG._finite(c.lower_bound)]
    s.certificate = max(valid, key=lambda c: c.lower_bound) if valid else None
    if evidence == "value":
        return s
    if s.hypotheses_failed:
        fac = s.factored
        if fac is not None and fac.variables["H"].size <= GEOMETRY_MAX_ENTRIES:
            v = fac.variables
            s.geometry = {**point_geometry(inst, v["W"], G.class_means(v["H"], inst.labels()), v["b"],
                                           labels=inst.labels(), H=v["H"]),
                          "source": "factored point (no statement is decided from it)"}
    else:
        _minimiser_evidence(s, phase_rtol)
        pts = [_solver_point(s, name, sol, Z, b, value_rtol, value_atol) for name, sol, Z, b in _solver_points(s)]
        if pts:
            s.geometry["solver_points"] = pts
    return s


def _closed_form(s: ClassicSolution, value_only: bool = False) -> None:
    """The closed form in class coordinates: certificate, phase, uniqueness, SVD factorization (not with
    ``value_only``), and (when a route) the value at the ETF constructor's point."""
    inst = s.inst
    tc = time.perf_counter()
    Zc, bc = T.optimal_class_logits(inst)
    phase = uniq = Wf = Mf = None
    # k x k decompositions on one BLAS thread: measured at k = 1000 on the shared 2-core machine,
    # 1.1-1.2 s of CPU and 2.6-3.3 s wall, against 1-24 s wall with threaded BLAS fighting other work
    with blas_threads(0.0):
        cf_cert = S.closed_form_certificate(inst)
        if not value_only:
            phase = S.zero_phase_ratio(inst)
            uniq = S.uniqueness_certificate(inst, Zc, bc, direction=S.closed_form_direction(inst))
            Wf, Mf = S.factor_classwise(inst, Zc)  # SVD factorization of Z*: independent of the ETF constructor
    s.closed_form = {"Zc": Zc, "b": bc, "cert": cf_cert, "phase": phase, "uniq": uniq, "W": Wf, "Mu": Mf,
                     "seconds": time.perf_counter() - tc}
    if "closed-form" in s.routes_run:
        W, Mu, b = T.optimal_class_point(inst)
        val = S.collapsed_objective(inst, W, Mu, b)
        s.routes["closed-form"] = {"value": val, "method": "closed-form", "converged": True,
                                   "seconds": time.perf_counter() - tc}
        s.feasible["closed-form"] = val
        cf_cert.method = "kkt-dual (class-reduced, at the closed form)"
    else:
        cf_cert.method = "kkt-dual (class-reduced, at the closed form; bound only)"
    s.certificates.append(cf_cert)


def _convex(s: ClassicSolution) -> None:
    cvx = S.solve_convex(s.inst)
    s.convex = cvx
    s.routes["convex"] = cvx.to_dict()
    for w in cvx.diagnostics.get("solver_warnings") or []:
        s.diagnostics.append(f"convex route: solver warning: {w}")
    if not cvx.converged:
        s.diagnostics.append(f"convex route: solver status {cvx.diagnostics.get('status')} (its point is still "
                             "feasible; its value is evaluated exactly)")
    if not s.hypotheses_failed:  # the convex value is attained by a factored point only when d >= k - 1
        s.feasible["convex"] = cvx.value
        s.certificates.append(cvx.certificate)


def _factored(s: ClassicSolution, starts, seed, backend, device, dtype) -> None:
    # work budget: the solver's iteration limit (maxiter per start, a count: the same result at any load); the
    # wall clock is only a safety net far above it (docs/ufm_general.md, "Budgets")
    budget = SG.WALL_SAFETY_S
    fac = S.solve_factored(s.inst, starts=starts, seed=seed, backend=backend, device=device, dtype=dtype,
                           time_budget=budget)
    s.factored = fac
    s.routes["factored"] = fac.to_dict()
    if fac.diagnostics.get("time_budget_reached"):
        s.diagnostics.append(f"factored route: {SG.SAFETY_MESSAGE} ({budget:.3g} s, after "
                             f"{fac.diagnostics.get('starts_run')} start(s))")
    s.feasible["factored"] = fac.value
    if not s.hypotheses_failed:
        fcert = S.certificate(s.inst, fac.variables["W"] @ fac.variables["H"], fac.variables["b"])
        fcert.method = "kkt-dual (factored candidate)"
        s.certificates.append(fcert)


def _solver_points(s: ClassicSolution):
    """(name, Solution, Z (k x N), b) of the solver routes whose points are reported (hypotheses hold)."""
    if s.convex is not None:
        yield "convex", s.convex, s.convex.variables["Z"], s.convex.variables["b"]
    if s.factored is not None:
        v = s.factored.variables
        yield "factored", s.factored, v["W"] @ v["H"], v["b"]


def _minimiser_evidence(s: ClassicSolution, phase_rtol: float) -> None:
    """The evidence measured at the closed form's Z* (class coordinates, one BLAS thread): the scale-free
    classification of its class means, self-duality (CE, collapse phase), the bias and its stationarity
    residual; and the report's geometry at Z*."""
    inst, cf = s.inst, s.closed_form
    rho0 = cf["phase"]["rho0"]
    s.phase = phase_name(rho0, phase_rtol)
    exact = None
    if s.phase == "threshold":
        # float64 cannot tell the side of rho0 = 1; the exact rationals can (zero also at rho0 = 1 exactly)
        exact = exact_phase(inst)
        if exact is not None and exact["zero_minimiser"]:
            s.phase = "zero"
    W, Mu, b = cf["W"], cf["Mu"], cf["b"]
    ev: dict = {}
    with blas_threads(0.0):
        if s.phase in ("zero", "collapse"):
            ev["classification"] = classify_scale_free(Mu.T @ Mu)
        if s.phase == "collapse" and inst.loss == "ce":
            rho = math.sqrt(inst.lw / (inst.n * inst.lh))
            nmu = float(np.linalg.norm(Mu))
            ev["self_duality_error"] = float(np.linalg.norm(Mu - rho * W.T)) / nmu if nmu > 0 else None
        ev["bias"] = _bias_evidence(inst, cf)
        geo_cf = point_geometry(inst, W, Mu, b)
    s.minimiser = ev
    s.geometry = {**geo_cf,
                  "source": "the certified minimiser Z* (closed form), factorised by an SVD",
                  "phase": {"rho0": rho0, "grad_norm_at_zero": cf["phase"]["grad_norm_at_zero"],
                            "lam": inst.lam, "phase_rtol": phase_rtol, "phase": s.phase,
                            **({"exact": exact} if exact is not None else {})},
                  "uniqueness": cf["uniq"]}


def _bias_evidence(inst: T.UFMInstance, cf: dict) -> dict:
    """CE: the spread of b* (constant up to the free shift); MSE: max |b* - 1/k|; both with the stationarity
    residual max |grad_b f| at (Z*, b*) and the gradient's scale."""
    b = cf["b"]
    V = S.class_gradient(inst, cf["Zc"], b)
    resid = float(np.max(np.abs(V.sum(axis=1)))) / inst.k + inst.lb * float(np.max(np.abs(b)))
    out = {"bias": b[: min(8, b.size)].tolist(), "stationarity_residual": resid,
           "gradient_scale": max(float(np.max(np.abs(V))), 1e-300)}
    if inst.loss == "ce":
        out["bias_spread"] = float(np.ptp(b))
    else:
        out["max_abs_b_minus_1_over_k"] = float(np.max(np.abs(b - 1.0 / inst.k)))
    return out


def _solver_point(s: ClassicSolution, name, sol, Z, b, value_rtol, value_atol) -> dict:
    """What a solver's point says (never decides a statement): its value gap to the proven bound, its
    class-mean geometry, and in the zero phase a proven radius to the unique minimiser Z* = 0."""
    inst, lower = s.inst, s.lower_bound
    gap = sol.value - lower if SG._finite(sol.value, lower) else None
    rep = {"route": name, "value": sol.value, "gap_to_proven_bound": gap, "converged": sol.converged}
    try:
        rho0 = s.closed_form["phase"]["rho0"]
        if s.phase == "zero" and gap is not None:
            r = S.zero_phase_radius(inst, max(gap, 0.0), 1.0 - rho0)
            zn = float(np.linalg.norm(Z))
            rep.update(radius=r, norm_Z=zn, radius_proof=HOW_RADIUS)
            s.diagnostics.append(f"{name} point: ||Z||_F = {_fmt(zn, 3)}, within the proven radius {_fmt(r, 3)} of "
                                 "the unique minimiser Z* = 0" if r is not None and zn <= r * (1 + 1e-9) + 1e-300
                                 else f"{name} point: ||Z||_F = {_fmt(zn, 3)}, radius {_fmt(r, 3)}")
        if Z.size <= GEOMETRY_MAX_ENTRIES:
            mu = G.class_means(Z, inst.labels())
            rep["logit_class_means_classification"] = G.classify_gram(mu.T @ mu).classification
    except Exception as exc:  # a report about an auxiliary point must not hide the statements
        rep["error"] = f"{type(exc).__name__}: {exc}"
    if gap is not None and not SG._within(gap, SG._tolerance(sol.value, value_rtol, value_atol)):
        s.diagnostics.append(f"{name} route: value {_fmt(sol.value)} is {_fmt(gap, 3)} above the proven lower "
                             "bound (not at the certified optimum: a local point or an inaccurate solve; decides nothing)")
    return rep


def phase_threshold(loss: str, k: int, n: int) -> float:
    """The phase threshold by value: s0 = sqrt(n) ||grad L(0)||_2 (KKT at Z = 0, independent of lambda);
    W = H = 0 is optimal iff s = sqrt(n lw lh) >= s0."""
    probe = T.UFMInstance(loss, k, n, k, 1.0, 1.0)
    return math.sqrt(n) * S.zero_phase_ratio(probe)["grad_norm_at_zero"]


def threshold_witness(loss: str, k: int, n: int, s: float) -> dict:
    """Is W = H = 0 the minimiser at s = sqrt(n lw lh) (lw = lh)? The numbers that decide it by value: rho0 =
    ||grad L(0)||_2/lam (<= 1 proves Z = 0 optimal; the certificate at Z = 0 then has gap ~0), the value of
    Z = 0 and its certified lower bound, and the closed-form point's value (a feasible witness when lower)."""
    lam = s / math.sqrt(n)
    inst = T.UFMInstance(loss, k, n, k, lam, lam)
    ph = S.zero_phase_ratio(inst)
    zero_cert = S.certificate_classwise(inst, np.zeros((k, k)), np.full(k, 0.0 if loss == "ce" else 1.0 / k))
    W, Mu, b = T.optimal_class_point(inst)
    return {"s": s, "lam": lam, "rho0": ph["rho0"], "zero_value": zero_cert.upper, "zero_lower_bound": zero_cert.lower_bound,
            "closed_form_value": S.collapsed_objective(inst, W, Mu, b)}
