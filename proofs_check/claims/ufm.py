"""Claims of the classic UFM family (docs/ufm.md) and the per-instance check used by
``ncproofs solve ufm-ce|ufm-mse``.

``check_instance`` returns a :class:`proofs_check.core.SolveReport`. Routes for one instance:
- closed form (theory.ufm) in class coordinates: the predicted value, an explicit feasible point, the KKT
  dual certificate (a proven lower bound) and the uniqueness certificate (docs/ufm.md, "Uniqueness"), which
  make the geometry, collapse, self-duality and bias of the closed form statements about every minimiser;
- convex nuclear-norm program (cvxpy through solvers.common.solve_conic, small instances; auxiliary);
- factored nonconvex solver (L-BFGS from several random starts), independent of the theory; its value is a
  feasible value, its point decides nothing (in the zero phase it comes with a proven radius).
Routes are planned from size estimates before anything is allocated (plan_routes).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, SolveReport, Verdict, at_certified_point,
                               exceeds, fmt, geometry_is, hypothesis_fails, is_finite, optimum_matches, point_statement,
                               symbolic_zero, tolerance, within)
from proofs_check.rigorous import judge_checks, judge_report
from solvers import ufm as S
from solvers.common import REFERENCE_FLOPS, blas_threads, work_text
from theory import geometry as G
from theory import ufm as T
from theory._validate import InputError, as_int

#: Relative tolerance on optimal values. Measured: the closed-form certificate's gap is ~5e-13 relative at
#: every tested scale (lambda 1e-12..1e12, k up to 1000; the 1e-12 slack of the dual point's spectral norm
#: dominates) and L-BFGS reaches ~1e-12 relative; 1e-9 leaves room, while a 1e-6 relative error in a formula
#: is 1000 times larger and is refuted at every scale.
VALUE_RTOL = 1e-9
#: Absolute part of the value tolerance. Every value is evaluated with relative accuracy (stable formulas)
#: and f* >= ~1e-13 in the accepted lambda range, so the absolute part is only a floor 1e17 times below
#: any optimum: it can never absorb a relative error (the old rule max(1, |f*|) 1e-8 accepted a 1% error
#: at f* = 1e-7).
VALUE_ATOL = 1e-30
#: Relative band around the phase threshold rho0 = ||grad L(0)||_2 / lam = 1 inside which float64 cannot
#: tell a vanishing simplex ETF from the zero minimiser (rho0 is computed to ~1e-15).
PHASE_RTOL = 1e-9
#: Self-duality mu_c = sqrt(lw/(n lh)) w_c at the SVD factorization of Z*: exact up to round-off (~1e-14).
SELF_DUAL_TOL = 1e-8
#: Bias statements: spread of b* and the stationarity residual max |grad_b| at (Z*, b*), relative to the
#: gradient's scale (round-off ~1e-16).
BIAS_TOL = 1e-10
#: "The minimiser is zero" judged from a solver point with its proven radius: ||Z*||_F <= this.
ZERO_POINT_TAU = 1e-6
#: Every instance must finish within 2 minutes on 2 cores: routes are planned so that their estimated
#: time stays below this, and the factored solver gets the remainder as its wall-clock budget.
TIME_LIMIT_S = 100.0
#: ``auto`` runs the convex route only below this estimated time (it is auxiliary).
AUTO_CONVEX_SECONDS = 10.0
#: Default memory limit: min(0.8 * available memory, this).
MEMORY_CAP = 2.5e9
METHODS = ("auto", "closed-form", "convex", "factored")

ZHU = "Zhu et al., NeurIPS 2021, Thm 3.1 (UFM, CE); docs/ufm.md"
ZHOU = "Zhou et al., ICML 2022; Han, Papyan & Donoho, ICLR 2022 (UFM, MSE); docs/ufm.md"
DERIVED = "ncproofs derivation (docs/ufm.md)"
HOW_UNIQUE = ("the closed form is certified optimal (dual gap <= tol) and its KKT dual "
              "G = -grad L/lam is strictly complementary off an injective face (docs/ufm.md, 'Uniqueness')")

Predictor = Callable[[T.UFMInstance], float]


def default_predict(inst: T.UFMInstance) -> float:
    return T.optimum(inst).value


def memory_limit(max_memory: float | None = None) -> float:
    """The memory budget in bytes: ``max_memory`` when given, else min(0.8 * available memory, 2.5 GB)."""
    if max_memory is not None:
        if isinstance(max_memory, bool) or not is_finite(max_memory) or float(max_memory) <= 0:
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


def plan_routes(inst: T.UFMInstance, method: str, starts: int, limit_bytes: float) -> tuple[list[str], list[str]]:
    """Which routes run, from size estimates made before anything is allocated (solvers.ufm.estimate).

    A route the user asked for explicitly that exceeds the memory limit or the time limit is refused
    (InputError with the estimate and the limit); ``auto`` skips it and says so in the diagnostics.
    """
    fam = f"ufm-{inst.loss}"
    size = f"k = {inst.k}, n = {inst.n}, d = {inst.d}"
    routes, diags = [], []
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
    if method == "convex" or (method == "auto" and not failed):
        e = S.estimate(inst, "convex")
        if method == "convex":
            if not fits(e, TIME_LIMIT_S / 2):
                raise InputError(f"{fam} ({size}): --method convex is limited to small instances: the conic "
                                 f"program needs {why(e, TIME_LIMIT_S / 2)}; use --method closed-form or factored")
            routes.append("convex")
        elif fits(e, AUTO_CONVEX_SECONDS):
            routes.append("convex")
        else:
            diags.append(f"convex route skipped ({why(e, AUTO_CONVEX_SECONDS)})")
    if method in ("auto", "factored"):
        e = S.estimate(inst, "factored", starts)
        if fits(e, TIME_LIMIT_S):
            routes.append("factored")
        elif method == "factored":
            raise InputError(f"{fam} ({size}, starts = {starts}): the factored solver needs "
                             f"{why(e, TIME_LIMIT_S)}; use fewer starts, --method closed-form, or --max-memory")
        else:
            diags.append(f"factored route skipped ({why(e, TIME_LIMIT_S)})")
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


def _point_geometry(inst: T.UFMInstance, W, Mu, b, *, labels=None, H=None) -> dict:
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


def check_instance(inst: T.UFMInstance, *, method: str = "auto", starts: int = 3, seed: int = 0,
                   predict: Predictor = default_predict, expected_geometry: str | None = None,
                   backend: str = "numpy", device: str | None = None, dtype: str = "float64",
                   max_memory: float | None = None) -> SolveReport:
    """Check one instance: the closed form's value (KKT dual certificate), the uniqueness of the minimiser
    and its geometry (docs/ufm.md), with the convex and factored solvers as further routes.

    ``predict`` and ``expected_geometry`` replace the theory's statements (tests feed false ones). Routes
    are planned from size estimates before anything is allocated (:func:`plan_routes`); ``max_memory``
    (bytes) replaces the default limit min(0.8 * available memory, 2.5 GB).
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    starts = as_int("starts", starts, minimum=1)
    seed = as_int("seed", seed, minimum=0)
    if expected_geometry is not None and expected_geometry not in G.GEOMETRY_CLASSES:
        raise InputError(f"expected_geometry must be one of {', '.join(G.GEOMETRY_CLASSES)}, got {expected_geometry!r}")
    fam = f"ufm-{inst.loss}"
    routes_to_run, diagnostics = plan_routes(inst, method, starts, memory_limit(max_memory))
    pred = T.optimum(inst)
    predicted = float(predict(inst))
    exp_geo = expected_geometry or pred.geometry
    failed = inst.hypotheses()
    tol = tolerance(predicted, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    routes: dict = {}
    certs: list = []
    feasible: dict = {}
    solver_points = []  # (name, Solution, Z (k x N), b)
    claims: list[Check] = []

    # --- the closed form: certificate, phase, uniqueness (class coordinates, O(k^2) memory) -------------
    cf = None
    if not failed:
        tc = time.perf_counter()
        Zc, bc = T.optimal_class_logits(inst)
        # k x k decompositions on one BLAS thread: measured at k = 1000 on the shared 2-core machine,
        # 1.1-1.2 s of CPU and 2.6-3.3 s wall, against 1-24 s wall with threaded BLAS fighting other work
        with blas_threads(0.0):
            cf_cert = S.closed_form_certificate(inst)
            phase = S.zero_phase_ratio(inst)
            uniq = S.uniqueness_certificate(inst, Zc, bc, direction=S.closed_form_direction(inst))
            Wf, Mf = S.factor_classwise(inst, Zc)  # SVD factorization of Z*: independent of the ETF constructor
        cf = {"Zc": Zc, "b": bc, "cert": cf_cert, "phase": phase, "uniq": uniq, "W": Wf, "Mu": Mf,
              "seconds": time.perf_counter() - tc}
        if "closed-form" in routes_to_run:
            W, Mu, b = T.optimal_class_point(inst)
            val = S.collapsed_objective(inst, W, Mu, b)
            routes["closed-form"] = {"value": val, "method": "closed-form", "converged": True,
                                     "seconds": time.perf_counter() - tc}
            feasible["closed-form"] = val
            cf_cert.method = "kkt-dual (class-reduced, at the closed form)"
        else:
            cf_cert.method = "kkt-dual (class-reduced, at the closed form; bound only)"
        certs.append(cf_cert)
    # --- the convex program (auxiliary) ----------------------------------------------------------------
    if "convex" in routes_to_run:
        cvx = S.solve_convex(inst)
        routes["convex"] = cvx.to_dict()
        for w in cvx.diagnostics.get("solver_warnings") or []:
            diagnostics.append(f"convex route: solver warning: {w}")
        if not cvx.converged:
            diagnostics.append(f"convex route: solver status {cvx.diagnostics.get('status')} (its point is still "
                               "feasible; its value is evaluated exactly)")
        if not failed:  # the convex value is attained by a factored point only when d >= k - 1
            feasible["convex"] = cvx.value
            certs.append(cvx.certificate)
            solver_points.append(("convex", cvx, cvx.variables["Z"], cvx.variables["b"]))
    # --- the factored nonconvex solver --------------------------------------------------------------------
    fac = None
    if "factored" in routes_to_run:
        # work budget: the solver's iteration limit (maxiter per start, a count: the same result at any load); the
        # wall clock is only a safety net far above it (docs/ufm_general.md, "Budgets")
        budget = SG.WALL_SAFETY_S
        fac = S.solve_factored(inst, starts=starts, seed=seed, backend=backend, device=device, dtype=dtype,
                               time_budget=budget)
        routes["factored"] = fac.to_dict()
        if fac.diagnostics.get("time_budget_reached"):
            diagnostics.append(f"factored route: {SG.SAFETY_MESSAGE} ({budget:.3g} s, after "
                               f"{fac.diagnostics.get('starts_run')} start(s))")
        Zf = fac.variables["W"] @ fac.variables["H"]
        feasible["factored"] = fac.value
        if not failed:
            fcert = S.certificate(inst, Zf, fac.variables["b"])
            fcert.method = "kkt-dual (factored candidate)"
            certs.append(fcert)
            solver_points.append(("factored", fac, Zf, fac.variables["b"]))
    attained = min(feasible.values()) if feasible else None
    valid = [c for c in certs if c.details.get("valid", True) and is_finite(c.lower_bound)]
    best_cert = max(valid, key=lambda c: c.lower_bound) if valid else None
    lower = best_cert.lower_bound if best_cert else None

    # --- statement 1: the optimal value ---------------------------------------------------------------
    if failed:
        claims.append(hypothesis_fails("optimal-value", "; ".join(failed),
                                       {"predicted": predicted, "attained": attained}))
    elif attained is None:
        claims.append(Check("optimal-value", Verdict.INCONCLUSIVE, "no feasible point computed", {"tolerance": tol}))
    else:
        claims.append(optimum_matches("optimal-value", predicted, attained=attained, lower_bound=lower, tol=tol,
                                      converged=all(r.get("converged", True) for r in routes.values()),
                                      certificate=best_cert.method if best_cert else "",
                                      evidence={"value_rtol": VALUE_RTOL, "value_atol": VALUE_ATOL,
                                                "feasible_values": dict(feasible)}))

    # --- statements about every minimiser (decided at the proven unique minimiser) -----------------------
    geometry: dict = {}
    if failed:
        claims.append(hypothesis_fails(f"geometry-{exp_geo}", "; ".join(failed)))
        if fac is not None and fac.variables["H"].size <= 5_000_000:
            geometry = {**_point_geometry(inst, fac.variables["W"], G.class_means(fac.variables["H"], inst.labels()),
                                          fac.variables["b"], labels=inst.labels(), H=fac.variables["H"]),
                        "source": "factored point (no statement is decided from it)"}
    else:
        with blas_threads(0.0):
            claims.extend(_minimiser_statements(inst, cf, exp_geo, tol))
            geo_cf = _point_geometry(inst, cf["W"], cf["Mu"], cf["b"])
        geometry = {**geo_cf,
                    "source": "the certified minimiser Z* (closed form), factorised by an SVD",
                    "phase": {"rho0": cf["phase"]["rho0"], "grad_norm_at_zero": cf["phase"]["grad_norm_at_zero"],
                              "lam": inst.lam, "phase_rtol": PHASE_RTOL,
                              "phase": _phase_name(cf["phase"]["rho0"])},
                    "uniqueness": cf["uniq"]}
        pts = []
        for name, sol, Z, b in solver_points:
            pts.append(_solver_point_report(inst, cf, name, sol, Z, b, lower, diagnostics))
        if pts:
            geometry["solver_points"] = pts

    feasible_routes = {k: v for k, v in routes.items() if k in feasible}
    best_route = min(feasible_routes.items(), key=lambda kv: kv[1]["value"]) if feasible_routes else None
    predicted_d = {"value": predicted, "geometry": exp_geo, "trivial": pred.trivial, "margin": pred.margin,
                   "threshold_s": 1.0 / inst.k, "s": T.ce_threshold(inst), "hypotheses_failed": failed}
    return SolveReport(family=fam, instance=inst.to_dict(), predicted=predicted_d,
                       solution=({**best_route[1], "route": best_route[0]} if best_route else None),
                       certificate=best_cert.to_dict() if best_cert else None, geometry=geometry, claims=claims,
                       routes=routes, diagnostics=diagnostics, seconds=time.perf_counter() - t0,
                       extra={"tolerance": {"value": tol, "value_rtol": VALUE_RTOL, "value_atol": VALUE_ATOL,
                                            "phase_rtol": PHASE_RTOL}},
                       live={"instance": inst})  # --rigorous bounds this instance as it is


def _phase_name(rho0: float) -> str:
    if not is_finite(rho0):
        return "unknown"
    if rho0 <= 1.0 - PHASE_RTOL:
        return "zero"
    if rho0 >= 1.0 + PHASE_RTOL:
        return "collapse"
    return "threshold"


def _minimiser_statements(inst: T.UFMInstance, cf: dict, exp_geo: str, tol: float) -> list[Check]:
    """Geometry, collapse, self-duality and bias of every minimiser, measured at the closed form's Z* and
    counted only when Z* is proven the unique minimiser (at_certified_point with unique=True)."""
    cert, uniq, phase = cf["cert"], cf["uniq"], cf["phase"]
    gap = cert.gap
    band = _phase_name(phase["rho0"]) in ("threshold", "unknown")
    unique = bool(uniq["valid"]) and within(gap, tol) and not band
    how = HOW_UNIQUE + f"; delta = {fmt(uniq['delta'], 3)}, face dimension {uniq['face_dimension']}"
    out = []
    ev_u = {k: v for k, v in uniq.items()}
    ev_u.update(certificate_gap=gap, tolerance=tol)
    if band:
        # the closed form's phase may be the wrong one here (a vanishing simplex ETF or zero): its uniqueness
        # certificate says nothing about the true minimiser, and neither do the statements measured at it
        out.append(Check("minimiser-unique", Verdict.INCONCLUSIVE,
                         f"at the phase threshold: rho0 = {phase['rho0']!r} is within {PHASE_RTOL:g} of 1, where float64 "
                         "cannot tell which of a vanishing simplex ETF and zero is the minimiser", ev_u))
    elif unique:
        out.append(Check("minimiser-unique", Verdict.VERIFIED,
                         f"Z* is the unique minimiser (b up to a constant shift for CE with a free bias): {how}", ev_u))
    else:
        bad = [k for k, ok in uniq["conditions"].items() if not ok]
        why = (f"conditions not confirmed: {', '.join(bad)}" if bad else
               f"the closed form is not certified (gap {fmt(gap, 3)} > {fmt(tol, 3)})")
        out.append(Check("minimiser-unique", Verdict.INCONCLUSIVE, f"uniqueness not proven: {why}", ev_u))
    rho0 = phase["rho0"]
    ph = _phase_name(rho0)
    W, Mu, b = cf["W"], cf["Mu"], cf["b"]

    def at_min(check: Check) -> Check:
        return at_certified_point(check, value=cert.upper, lower_bound=cert.lower_bound, tol=tol, unique=unique,
                                  how=how)

    name = f"geometry-{exp_geo}"
    ev = {"rho0": rho0, "phase": ph, "phase_rtol": PHASE_RTOL, "source": "closed-form Z*, SVD factorization"}
    if ph == "threshold":
        out.append(Check(name, Verdict.INCONCLUSIVE,
                         f"at the phase threshold: rho0 = ||grad L(0)||_2/lam = {rho0!r} is within {PHASE_RTOL:g} of 1, "
                         "where float64 cannot tell a vanishing simplex ETF from the zero minimiser", ev))
    elif ph == "unknown":
        out.append(Check(name, Verdict.INCONCLUSIVE, "the phase ratio is not a finite number", ev))
    else:
        gc = classify_scale_free(Mu.T @ Mu)
        out.append(at_min(geometry_is(name, exp_geo, gc, evidence=ev)))
    if ph == "collapse":
        # Z* has equal columns within each class (class coordinates), so every balanced factorization has
        # h_i = mu_{y_i}: a structural fact of the candidate (consistency), made about every minimiser by uniqueness.
        out.append(at_min(Check("collapse", Verdict.VERIFIED,
                                "Z* is class-constant, so its factorization has h_i = mu_{y_i} (NC1 = 0)",
                                {"NC1": 0.0, "structure": "Z* = Zc (I_k kron 1_n^T)"}, independent=False)))
        if inst.loss == "ce":
            rho = math.sqrt(inst.lw / (inst.n * inst.lh))
            nmu = float(np.linalg.norm(Mu))
            sd = float(np.linalg.norm(Mu - rho * W.T)) / nmu if nmu > 0 else None
            ok = sd is not None and within(sd, SELF_DUAL_TOL)
            c = Check("self-duality", Verdict.VERIFIED if ok else (Verdict.REFUTED if is_finite(sd) else Verdict.INCONCLUSIVE),
                      f"||mu - sqrt(lw/(n lh)) W^T||/||mu|| = {fmt(sd, 3)} " + ("<=" if ok else ">") + f" {SELF_DUAL_TOL:g}",
                      {"self_duality_error": sd, "tolerance": SELF_DUAL_TOL})
            out.append(at_min(c))
    out.append(at_min(_bias_check(inst, cf)))
    return out


def _bias_check(inst: T.UFMInstance, cf: dict) -> Check:
    """CE: the bias of every minimiser is constant (b* = 0 up to the free constant shift); MSE: b = 1/k.
    Measured: the spread/offset of b* and the stationarity residual max |grad_b f| at (Z*, b*)."""
    b = cf["b"]
    V = S.class_gradient(inst, cf["Zc"], b)
    resid = float(np.max(np.abs(V.sum(axis=1)))) / inst.k + inst.lb * float(np.max(np.abs(b)))
    scale = max(float(np.max(np.abs(V))), 1e-300)
    ev = {"bias": b[: min(8, b.size)].tolist(), "stationarity_residual": resid, "tolerance": BIAS_TOL}
    if inst.loss == "ce":
        spread = float(np.ptp(b))
        ev["bias_spread"] = spread
        ok = within(spread, BIAS_TOL) and within(resid, BIAS_TOL * scale + 64 * S.UNIT_ROUNDOFF)
        return Check("constant-bias", Verdict.VERIFIED if ok else Verdict.INCONCLUSIVE,
                     f"b* spread {fmt(spread, 3)}, stationarity residual {fmt(resid, 3)}", ev)
    off = float(np.max(np.abs(b - 1.0 / inst.k)))
    ev["max_abs_b_minus_1_over_k"] = off
    ok = within(off, BIAS_TOL) and within(resid, BIAS_TOL * scale + 64 * S.UNIT_ROUNDOFF)
    return Check("bias-one-over-k", Verdict.VERIFIED if ok else Verdict.INCONCLUSIVE,
                 f"max |b* - 1/k| = {fmt(off, 3)}, stationarity residual {fmt(resid, 3)}", ev)


def _solver_point_report(inst, cf, name, sol, Z, b, lower, diagnostics) -> dict:
    """What a solver's point says (never decides a statement): its value gap to the proven bound, its
    class-mean geometry, and in the zero phase a proven radius to the unique minimiser Z* = 0."""
    gap = sol.value - lower if is_finite(sol.value, lower) else None
    rep = {"route": name, "value": sol.value, "gap_to_proven_bound": gap, "converged": sol.converged}
    try:
        rho0 = cf["phase"]["rho0"]
        if _phase_name(rho0) == "zero" and gap is not None:
            r = S.zero_phase_radius(inst, max(gap, 0.0), 1.0 - rho0)
            zn = float(np.linalg.norm(Z))
            how = "||Z - Z*||_F <= ||Z||_* <= gap / (lam (1 - rho0)) (docs/ufm.md, 'Radius')"
            rep.update(radius=r, norm_Z=zn, radius_proof=how)
            # what the point alone proves about "the minimiser is zero" (||Z*||_F <= ZERO_POINT_TAU)
            rep["statement_zero"] = point_statement("minimiser-zero", zn, ZERO_POINT_TAU, radius=r, how=how,
                                                    what="||Z||_F").to_dict()
            diagnostics.append(f"{name} point: ||Z||_F = {fmt(zn, 3)}, within the proven radius {fmt(r, 3)} of the "
                               "unique minimiser Z* = 0" if r is not None and zn <= r * (1 + 1e-9) + 1e-300
                               else f"{name} point: ||Z||_F = {fmt(zn, 3)}, radius {fmt(r, 3)}")
        if Z.size <= 5_000_000:
            mu = G.class_means(Z, inst.labels())
            rep["logit_class_means_classification"] = G.classify_gram(mu.T @ mu).classification
    except Exception as exc:  # a report about an auxiliary point must not hide the statements
        rep["error"] = f"{type(exc).__name__}: {exc}"
    if gap is not None and not within(gap, tolerance(sol.value, rtol=VALUE_RTOL, atol=VALUE_ATOL)):
        diagnostics.append(f"{name} route: value {fmt(sol.value)} is {fmt(gap, 3)} above the proven lower bound "
                           "(not at the certified optimum: a local point or an inaccurate solve; decides nothing)")
    return rep


# ---------------------------------------------------------------------------------------
# Claim factories (tests feed false statements through ``predict`` / ``expected``)
# ---------------------------------------------------------------------------------------

def _instances(loss: str, ctx: RunContext, phase: str) -> list[T.UFMInstance]:
    if loss == "ce":
        quick = {"collapse": [(3, 2, 3, 0.01, 0.01, 0.0), (5, 2, 5, 1e-3, 1e-3, 0.0), (4, 3, 6, 5e-3, 2e-2, 1e-2)],
                 "trivial": [(4, 2, 4, 0.2, 0.2, 0.0), (3, 1, 2, 0.5, 0.8, 0.0)]}
        full = {"collapse": [(6, 4, 8, 1e-3, 3e-3, 0.0), (8, 2, 7, 1e-4, 1e-3, 1e-3), (10, 3, 12, 2e-3, 2e-3, 0.0)],
                "trivial": [(6, 3, 6, 0.1, 0.2, 0.0)]}
    else:
        quick = {"collapse": [(3, 2, 3, 0.01, 0.01, 0.0), (3, 4, 3, 0.05, 0.05, 0.0), (5, 2, 4, 1e-3, 5e-3, 0.0)],
                 "trivial": [(3, 2, 3, 0.2, 0.2, 0.0)]}
        full = {"collapse": [(8, 3, 8, 1e-3, 1e-3, 0.0), (10, 2, 9, 2e-3, 1e-3, 0.0)],
                "trivial": [(6, 2, 6, 0.3, 0.1, 0.0)]}
    rows = quick[phase] + (full[phase] if ctx.full else [])
    return [T.UFMInstance(loss, k, n, d, lw, lh, lb) for k, n, d, lw, lh, lb in rows]


def _tag(inst: T.UFMInstance) -> str:
    return f"k={inst.k} n={inst.n} d={inst.d} lw={inst.lw:g} lh={inst.lh:g} lb={inst.lb:g}"


def value_claim(loss: str, *, predict: Predictor = default_predict, claim_id: str | None = None,
                statement: str | None = None) -> Claim:
    fam = f"ufm-{loss}"

    def check(ctx: RunContext):
        for phase in ("collapse", "trivial"):
            for inst in _instances(loss, ctx, phase):
                rep = judge_report(check_instance(inst, method="auto", starts=2, seed=ctx.seed, predict=predict), ctx)
                c = next(ch for ch in rep.claims if ch.name == "optimal-value")
                yield Check(_tag(inst), c.verdict, c.reason, c.evidence, c.independent, c.rigorous)
        # the certificate route alone at a larger k (cheap: class-reduced)
        big = T.UFMInstance(loss, 40 if not ctx.full else 200, 5, 40 if not ctx.full else 200, 1e-3, 1e-3)
        W, Mu, b = T.optimal_class_point(big)
        cert = S.closed_form_certificate(big)
        p = predict(big)
        name = f"k={big.k} n={big.n} (closed form + KKT certificate only)"
        yield from judge_checks(fam, big.to_dict(), [optimum_matches(
            name, p, attained=S.collapsed_objective(big, W, Mu, b), lower_bound=cert.lower_bound,
            tol=tolerance(p, rtol=VALUE_RTOL, atol=VALUE_ATOL), certificate="kkt-dual")], ctx)  # judged by its statement

    if loss == "ce":
        st = statement or ("For balanced UFM with CE and weight decay (d >= k-1), the optimal value is "
                           "-log(1-(k-1)s) + (k-1)s log(1/s-(k-1)) with s = sqrt(n lw lh) when s < 1/k, and log k otherwise; "
                           "a bias penalty does not change it.")
    else:
        st = statement or ("For balanced UFM with MSE, weight decay and an unregularized bias (d >= k-1), the optimal "
                           "value is (k-1)((sqrt(n)-z)^2/(2N) + lam z) with lam = sqrt(lw lh), z = max(sqrt(n) - N lam, 0).")
    return Claim(claim_id or f"ufm.{loss}.optimal-value", "ufm", st, DERIVED, Provenance.DERIVED, check,
                 key=("predicted", "lower_bound", "gap"))


def geometry_claim(loss: str, *, expected: str = "simplex-etf", claim_id: str | None = None) -> Claim:
    """Every global minimiser (d >= k-1, collapse phase) is collapsed with simplex-ETF class means (and
    self-dual with a constant bias for CE; bias 1/k for MSE). Decided at the closed form, proven the unique
    minimiser; the factored solver runs as an independent route for the value."""
    fam = f"ufm-{loss}"

    def check(ctx: RunContext):
        for inst in _instances(loss, ctx, "collapse"):
            rep = judge_report(check_instance(inst, method="factored", starts=3 if ctx.full else 2, seed=ctx.seed,
                                              expected_geometry=expected), ctx)
            for c in rep.claims:
                yield Check(f"{_tag(inst)}: {c.name}", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    if loss == "ce":
        st = ("Every global minimizer of the CE UFM with weight decay (d >= k-1, s < 1/k) has within-class collapse, "
              "class means forming a simplex ETF, self-duality mu_c = sqrt(lw/(n lh)) w_c, and a constant bias.")
        return Claim(claim_id or "ufm.ce.collapse-etf", "ufm", st, ZHU, Provenance.RECONSTRUCTED, check,
                     key=("delta", "self_duality_error", "certificate_gap"))
    st = ("Every global minimizer of the MSE UFM with weight decay and unregularized bias (d >= k-1, z > 0) has "
          "within-class collapse, simplex-ETF class means and bias 1/k.")
    return Claim(claim_id or "ufm.mse.collapse-etf", "ufm", st, ZHOU, Provenance.RECONSTRUCTED, check,
                 key=("delta", "certificate_gap"))


def threshold_witness(loss: str, k: int, n: int, s: float) -> dict:
    """Is W = H = 0 the minimiser at s = sqrt(n lw lh) (lw = lh)? Decided by value: rho0 = ||grad L(0)||_2/lam
    <= 1 proves Z = 0 optimal (KKT at 0; the certificate at Z = 0 then has gap ~0), rho0 > 1 proves it is not
    (the closed-form point has a lower value, a feasible witness). Returns the numbers."""
    lam = s / math.sqrt(n)
    inst = T.UFMInstance(loss, k, n, k, lam, lam)
    ph = S.zero_phase_ratio(inst)
    zero_cert = S.certificate_classwise(inst, np.zeros((k, k)), np.full(k, 0.0 if loss == "ce" else 1.0 / k))
    W, Mu, b = T.optimal_class_point(inst)
    return {"s": s, "lam": lam, "rho0": ph["rho0"], "zero_value": zero_cert.upper, "zero_lower_bound": zero_cert.lower_bound,
            "closed_form_value": S.collapsed_objective(inst, W, Mu, b)}


def trivial_phase_claim(*, threshold: Callable[[int], float] = lambda k: 1.0 / k, loss: str = "ce",
                        claim_id: str | None = None) -> Claim:
    """W = H = 0 is the global minimizer iff s = sqrt(n lw lh) >= threshold(k) (claimed 1/k, both losses).

    The threshold is computed by value: s0 = sqrt(n) ||grad L(0)||_2 (KKT at Z = 0), compared with the claim at
    relative tolerance PHASE_RTOL. A claimed threshold off by more is REFUTED with a witness instance at the
    geometric mean of the two thresholds: there either Z = 0 is proven optimal (dual certificate at 0) although
    the claim says it is not, or a feasible point beats Z = 0 by more than the value tolerance although the
    claim says Z = 0 is optimal. Without such a witness: INCONCLUSIVE.
    """

    def check(ctx: RunContext):
        ks = (2, 3, 5, 8) + ((13, 20) if ctx.full else ())
        for k in ks:
            for n in (1, 2, 5):
                claimed = float(threshold(k))
                probe = T.UFMInstance(loss, k, n, k, 1.0, 1.0)
                gz = S.zero_phase_ratio(probe)["grad_norm_at_zero"]  # independent of lambda
                s0 = math.sqrt(n) * gz  # Z = 0 optimal iff s >= s0
                ev = {"claimed_threshold": claimed, "threshold_by_value": s0, "rtol": PHASE_RTOL,
                      "formula_1_over_k": 1.0 / k}
                tag = f"k={k} n={n}"
                if not is_finite(claimed) or claimed <= 0:
                    yield Check(tag, Verdict.INCONCLUSIVE, f"claimed threshold is not a positive number ({claimed})", ev)
                    continue
                rel = abs(claimed - s0) / s0
                ev["relative_difference"] = rel
                if within(rel, PHASE_RTOL):
                    yield Check(tag, Verdict.VERIFIED, f"threshold by value {s0!r} = claimed {claimed!r} "
                                f"(relative {fmt(rel, 3)} <= {PHASE_RTOL:g})", ev)
                    continue
                s = math.sqrt(claimed * s0)
                try:
                    w = threshold_witness(loss, k, n, s)
                except InputError as exc:
                    yield Check(tag, Verdict.INCONCLUSIVE, f"no witness instance in the accepted range: {exc}", ev)
                    continue
                ev.update(witness=w)
                vtol = tolerance(w["zero_value"], rtol=VALUE_RTOL, atol=VALUE_ATOL)
                if claimed > s0:  # the claim says Z = 0 is not optimal at s; a certificate proves it is
                    ok = w["rho0"] <= 1.0 and within(w["zero_value"] - w["zero_lower_bound"], vtol)
                    yield Check(tag, Verdict.REFUTED if ok else Verdict.INCONCLUSIVE,
                                (f"at s = {fmt(s)} < claimed threshold, W = H = 0 is proven optimal (rho0 = "
                                 f"{fmt(w['rho0'])}, dual gap {fmt(w['zero_value'] - w['zero_lower_bound'], 3)})")
                                if ok else "the witness is not decided within the tolerances", ev)
                else:  # the claim says Z = 0 is optimal at s; a feasible point is lower
                    ok = exceeds(w["zero_value"] - w["closed_form_value"], vtol)
                    yield Check(tag, Verdict.REFUTED if ok else Verdict.INCONCLUSIVE,
                                (f"at s = {fmt(s)} >= claimed threshold, a feasible point attains "
                                 f"{fmt(w['closed_form_value'])} < {fmt(w['zero_value'])} = value of W = H = 0")
                                if ok else "the witness's improvement is below the value tolerance", ev)
        if loss == "ce":
            yield symbolic_zero("g'(0) vanishes at s = 1/k", T.symbolic_ce_reduction()["threshold"])

    return Claim(claim_id or f"ufm.{loss}.trivial-phase", "ufm",
                 f"{loss.upper()} UFM: W = H = 0 is the global minimizer iff sqrt(n lw lh) >= 1/k.",
                 DERIVED, Provenance.DERIVED, check, key=("threshold_by_value",))


def symbolic_claim(loss: str) -> Claim:
    def check(ctx: RunContext):
        exprs = T.symbolic_ce_reduction() if loss == "ce" else T.symbolic_mse_reduction()
        for name, e in exprs.items():
            yield symbolic_zero(name, e)

    if loss == "ce":
        st = ("The CE UFM reduces to g(c) = log(1+(k-1)e^-c) + (k-1)s c (nuclear norm of c J_k Y is (k-1)sqrt(n)c); "
              "g is convex with stationary point c* = log(1/s-(k-1)), g(c*) = -log(1-(k-1)s) + (k-1)s c*, "
              "and g'(0) = 0 at s = 1/k.")
    else:
        st = ("The MSE UFM reduces to singular-value soft thresholding of the centred labels (singular values "
              "sqrt(n)) at N lam; the resulting value is (k-1)((sqrt(n)-z)^2/(2N) + lam z).")
    return Claim(f"ufm.{loss}.symbolic-derivation", "ufm", st, DERIVED, Provenance.DERIVED, check)


def bias_penalty_claim() -> Claim:
    def check(ctx: RunContext):
        for lb in (0.0, 1e-2, 1.0):
            inst = T.UFMInstance("ce", 4, 2, 4, 5e-3, 1e-2, lb)
            rep = judge_report(check_instance(inst, method="factored", starts=1, seed=ctx.seed), ctx)
            c = next(ch for ch in rep.claims if ch.name == "optimal-value")
            # the statement: the unregularized closed form is the optimum with a bias penalty too,
            # certified by the factored value and the dual bound (with its bias term)
            yield Check(f"lb={lb:g}: optimum = unregularized closed form", c.verdict, c.reason,
                        {**c.evidence, "bias_mean": rep.geometry.get("bias_mean")}, c.independent, c.rigorous)

    return Claim("ufm.ce.bias-penalty-invariance", "ufm",
                 "A bias penalty (lb/2)||b||^2 does not change the optimal CE UFM value (the optimal bias is then 0).",
                 "docs/ufm.md (Zhu et al. setting)", Provenance.DERIVED, check)


CLAIMS = [
    symbolic_claim("ce"),
    value_claim("ce"),
    geometry_claim("ce"),
    trivial_phase_claim(),
    bias_penalty_claim(),
    trivial_phase_claim(loss="mse"),
    symbolic_claim("mse"),
    value_claim("mse"),
    geometry_claim("mse"),
]


# =====================================================================================================
# Any loss, any class sizes, regression (docs/ufm_general.md): `ncproofs solve ufm|ufm-regression`
# =====================================================================================================

from solvers import ufm_general as SG  # noqa: E402

#: Relative value tolerance of the general engine. Measured: certificate gaps of the class-reduced L-BFGS
#: candidate are 1e-12..2e-10 relative (CE, LS both conventions, weighted CE, MSE; balanced and imbalanced,
#: k <= 10); independent cvxpy solves agree with the certified values to ~1e-13. A 1e-6 relative error in a
#: claimed value is 100 times larger and is refuted.
GEN_VALUE_RTOL = 1e-8
GEN_VALUE_ATOL = 1e-30
HOW_GENERAL_UNIQUE = ("the closed form is certified optimal (dual gap <= tol) and its dual certificate is strictly "
                      "complementary with an injective face (docs/ufm.md, 'Uniqueness'; docs/ufm_general.md)")
GENERAL_SOURCE = "docs/ufm_general.md (derived: Fenchel dual of the nuclear-norm reformulation)"


def _near_phase_threshold(p: "SG.GeneralUFM") -> bool:
    """The balanced closed form changes phase (simplex ETF <-> zero) between lam (1 - PHASE_RTOL) and
    lam (1 + PHASE_RTOL): the phase is then not decided in float64 (the ufm-ce/ufm-mse band, same tolerance)."""
    n = int(p.counts[0])
    lo = p.loss.closed_form(p.K, n, p.lam * (1.0 - PHASE_RTOL))
    hi = p.loss.closed_form(p.K, n, p.lam * (1.0 + PHASE_RTOL))
    return lo is not None and hi is not None and bool(lo.get("trivial")) != bool(hi.get("trivial"))


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


def _closed_form_point(p: "SG.GeneralUFM", cf: dict):
    """X (class coordinates) and b of a balanced closed form: Z = m J_K per class (CE-type: m = c*, b = 0;
    MSE: m = z / sqrt(n), b = 1/K); X = Zc sqrt(n)."""
    K, n = p.K, int(p.counts[0])
    J = np.eye(K) - 1.0 / K
    if p.loss.name == "mse":
        return (cf["margin"] / math.sqrt(n)) * J * math.sqrt(n), np.full(K, 1.0 / K)
    return cf["margin"] * J * math.sqrt(n), np.zeros(K)


def _closed_form_grouped(p: "SG.GeneralUFM", cf: dict) -> "SG.GroupedPoint":
    """The balanced closed form as an invariant point of one group: X = beta J (A = 0 on the all-ones
    direction, beta = c* sqrt(n) for CE-type losses, z for MSE), b = 0 (CE) or 1/K (MSE)."""
    n = int(p.counts[0])
    if p.loss.name == "mse":
        return SG.GroupedPoint(np.zeros((1, 1)), np.array([float(cf["margin"])]), np.array([1.0 / p.K]))
    return SG.GroupedPoint(np.zeros((1, 1)), np.array([float(cf["margin"]) * math.sqrt(n)]), np.zeros(1))


def check_general(p: "SG.GeneralUFM", *, starts: int = 2, seed: int = 0, claimed_value: float | None = None,
                  time_budget: float | None = None, minority_threshold: float | None = 1.0,
                  geometry_expected: dict | None = None) -> SolveReport:
    """Solve and certify one instance of the general UFM (any loss object, any counts). See docs/ufm_general.md.

    Statements: ``optimal-value`` (closed form where the loss has one for balanced classes, else the certified
    value; ``claimed_value`` replaces the prediction), ``minimiser-unique`` and ``geometry-*`` (VERIFIED only at
    an exact closed form with a strictly complementary certificate; else INCONCLUSIVE "no geometry
    certificate"), ``relaxation-tight`` when d is below the rank of the relaxation's optimum."""
    t0 = time.perf_counter()
    diagnostics: list[str] = []
    layout = SG.class_layout(p)
    est = SG.estimate(p, starts, layout)
    if est["bytes"] > MEMORY_CAP or est["seconds"] > TIME_LIMIT_S:
        raise InputError(f"instance too large: estimated {est['bytes'] / 1e9:.2f} GB (limit {MEMORY_CAP / 1e9:.1f} GB) "
                         f"and {work_text(est['seconds'], TIME_LIMIT_S)} (docs/ufm_general.md, 'Budgets')")
    balanced = bool(np.all(p.counts == p.counts[0])) and p.kind == "classification"
    cf = p.loss.closed_form(p.K, int(p.counts[0]), p.lam) if balanced and p.lb == 0.0 else None
    cf_failed = closed_form_hypotheses(p.loss) if cf is not None else []
    if cf_failed:
        cf = None  # the package's closed form outside its hypothesis: no prediction (NOT_APPLICABLE below)
    full_rank = min(p.K, p.G)
    pt = None
    mse_cf = SG.mse_imbalanced_closed_form(p) if cf is None and not balanced else None
    if mse_cf is not None:
        # imbalanced MSE: singular-value soft thresholding of D^{1/2} P (docs/ufm_general.md, "Imbalanced MSE in
        # closed form"); certified at the exact closed form, no search
        X, b = mse_cf["X"], mse_cf["b"]
        with blas_threads(0):
            cert = SG.certificate(p, X, b, grads=mse_cf["grads"])
            geo_full = SG.geometry(p, X, b)
        rank = mse_cf["rank"]
        from solvers.common import Solution as _Sol

        sol = _Sol(cert.upper, "closed form (imbalanced MSE: soft thresholding of D^{1/2} P)", True, 0.0,
                   {"X": X, "b": b}, {"start_values": None})
        diagnostics.append("imbalanced MSE: the closed form (singular-value soft thresholding of the class-reduced "
                           "centred targets), certified at that point")
    elif layout is not None:
        # exchangeable classes grouped: the solve and the certificate in O(m^2) per evaluation (m groups)
        init = _closed_form_grouped(p, cf) if cf is not None and layout.m == 1 else None
        with blas_threads(0):
            sol = SG.solve_grouped(p, layout, starts=starts, seed=seed, x_init=init, time_budget=time_budget)
        pt = SG.clean_grouped(p, sol.variables["point"], layout)
        cert = SG.certificate_grouped(p, pt, layout)
        rank = pt.rank(layout)
        if p.K <= SG.EXPAND_MAX:
            X, b = SG.grouped_full(p, pt, layout)
            with blas_threads(0):
                geo_full = SG.geometry(p, X, b)
        else:
            X = b = None
            geo_full = SG.geometry_grouped(p, pt, layout)
        diagnostics.append(f"{p.K} classes in {layout.m} groups of exchangeable classes (equal counts"
                           + (" and weights" if getattr(p.loss, "weighted", False) else "")
                           + "): solved and certified per group (docs/ufm_general.md, 'Grouping exchangeable classes')")
    else:
        # the relaxation (rank up to min(K, G)); from the closed form when there is one, plus random starts
        init = _closed_form_point(p, cf) if cf is not None else None
        with blas_threads(0):
            sol = SG.solve_factored(p, rank=full_rank, starts=starts, seed=seed, x_init=init,
                                    time_budget=time_budget)
        X, b = sol.variables["X"], sol.variables["b"]
        X = SG.clean_candidate(p, X, b)
        cert = SG.certificate(p, X, b)
        geo_full = SG.geometry(p, X, b)
        rank = geo_full["rank"]
    lower = cert.lower_bound
    live = {"problem": p, "layout": layout, "point": pt, "X": X, "b": b}  # --rigorous bounds this candidate
    claims: list[Check] = []
    predicted: dict = {"value": None}
    if mse_cf is not None:
        predicted = {"value": mse_cf["value"], "rank": mse_cf["rank"], "threshold_N_lambda": mse_cf["threshold"],
                     "source": "docs/ufm_general.md, 'Imbalanced MSE in closed form' (derived)"}
    if cf is not None:
        predicted = {"value": cf["value"], "margin": cf["margin"], "geometry": cf["geometry"],
                     "source": GENERAL_SOURCE}
    tight = rank <= p.d
    if tight:
        attained = cert.upper
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
        c = optimum_matches("optimal-value", pred, attained=attained, lower_bound=lower, tol=tol,
                            certificate=cert.method, evidence={"prediction": how, "bound": cert.details.get("bound")})
        claims.append(c)
        if cf_failed:
            claims.append(hypothesis_fails("closed-form", "; ".join(cf_failed),
                                           {"certified_value": attained, "lower_bound": lower}))
        if layout is not None and not balanced and minority_threshold is not None:
            mc = minority_collapse_check(p, layout, cert, threshold=minority_threshold, seed=seed,
                                         time_budget=time_budget)
            if mc is not None:
                claims.append(mc)
    else:
        # d below the rank: the best point in dimension d against the relaxation's bound. The rank-d problem is
        # not convex, so grouping does not apply to it: it runs on the K x K problem when that fits the budget.
        if mse_cf is not None:
            # imbalanced MSE: the rank-d problem is decided exactly (von Neumann's trace inequality), as in regression
            low_d = _von_neumann_rank_d(mse_cf["singular_values"], mse_cf["threshold"], p.lam, p.N, p.K, p.d)
            best = SG.convex_value(p, SG.truncate(X, p.d), b)
            lower_d = max(low_d, lower)
            claims.append(hypothesis_fails("optimal-value", f"the imbalanced-MSE closed form needs d >= its rank: d = "
                                           f"{p.d} < {rank}"))
            claims.append(_rank_d_value(best, lower_d, lower, p.d))
            if claimed_value is not None:
                claims.append(lower_bound_claim_general(claimed_value, lower_d, best))
            cert_d = SG.Certificate(lower_d, cert.upper, "rank-d bound (von Neumann) and relaxation dual", cert.details)
            return SolveReport("ufm", p.to_dict(), {"value": best, "note": "d below the rank: the soft-thresholded "
                               "targets truncated to rank d (exact by von Neumann's trace inequality)"},
                               {"value": best, "method": "closed form truncated to rank d", "rank_limit": p.d},
                               _below_rank_certificate(cert_d, best), {"relaxation_rank": rank}, claims, {},
                               diagnostics, seconds=time.perf_counter() - t0, live=live)
        full_est = SG.estimate(p, starts)
        if X is None or full_est["bytes"] > MEMORY_CAP or full_est["seconds"] > TIME_LIMIT_S:
            ev = {"relaxation_lower_bound": lower, "relaxation_rank": rank, "d": p.d,
                  "rank_d_search": f"skipped: the K x K rank-d search needs {full_est['bytes'] / 1e9:.2f} GB and "
                                   f"{full_est['seconds']:.0f} s (limits {MEMORY_CAP / 1e9:.1f} GB, {TIME_LIMIT_S:.0f} s)"}
            claims.append(Check("relaxation-tight", Verdict.INCONCLUSIVE,
                                f"d = {p.d} is below the rank {rank} of the convex relaxation's optimum, so the "
                                f"relaxation is not tight here: the optimum is >= the relaxation's lower bound "
                                f"{fmt(lower)}; no point in dimension d was searched ({ev['rank_d_search']})", ev))
            if claimed_value is not None:
                claims.append(lower_bound_claim_general(claimed_value, lower, None))
            return SolveReport("ufm", p.to_dict(), {"value": None, "note": "no prediction: d is below the rank of the "
                               "relaxation's optimum"}, None, _below_rank_certificate(cert, None),
                               {"relaxation_rank": rank}, claims, {"factored-relaxation": sol.to_dict()}, diagnostics,
                               seconds=time.perf_counter() - t0, live=live)
        with blas_threads(0):
            sd = SG.solve_factored(p, rank=p.d, starts=starts, seed=seed + 1, x_init=(X, b),
                                   time_budget=time_budget)
        best = SG.convex_value(p, SG.truncate(sd.variables["X"], p.d), sd.variables["b"])
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
        sol_d = {"value": best, "method": sd.method, "rank_limit": p.d}
        return SolveReport("ufm", p.to_dict(), predicted, sol_d, _below_rank_certificate(cert, best),
                           {"relaxation_rank": rank, "note": "not reported: the relaxation's geometry does not fit in "
                            f"d = {p.d} dimensions"}, claims,
                           {"factored-relaxation": sol.to_dict(), "factored-d": sd.to_dict()}, diagnostics,
                           seconds=time.perf_counter() - t0, live=live)
    # geometry and uniqueness
    geo_at = geo_full
    unique_how = None
    if X is None:
        st = SG.structural_uniqueness(p)
        vtol = tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
        if st["ok"] and within(cert.gap, vtol):
            claims.append(Check("minimiser-unique", Verdict.VERIFIED,
                                f"unique in (Z, centred bias): {st['why']}; the optimum exists and is certified (gap "
                                f"{fmt(cert.gap, 3)} <= {fmt(vtol, 3)}); no radius or geometry for K = {p.K} > "
                                f"{SG.EXPAND_MAX} (no K x K matrices formed)", {**st, "certificate_gap": cert.gap}))
        else:
            claims.append(Check("minimiser-unique", Verdict.INCONCLUSIVE,
                                f"no geometry certificate for K = {p.K} > {SG.EXPAND_MAX} classes: "
                                + (st["why"] if not st["ok"] else f"the value is not certified (gap {fmt(cert.gap, 3)})"),
                                {"classes": p.K, **st}))
    elif cf is not None and tight and _near_phase_threshold(p):
        # within PHASE_RTOL of the phase threshold float64 cannot tell a vanishing simplex ETF from the zero
        # minimiser: the closed form's phase may be the wrong one, so it proves nothing about the minimiser
        claims.append(Check("minimiser-unique", Verdict.INCONCLUSIVE,
                            f"at the phase threshold: lambda within {PHASE_RTOL:g} relative of the value where the closed "
                            f"form switches between a simplex ETF and zero; float64 cannot tell which is the minimiser",
                            {"phase_rtol": PHASE_RTOL, "closed_form_phase": "zero" if cf.get("trivial") else "collapse"}))
    elif cf is not None and tight:
        Xc, bc = _closed_form_point(p, cf)
        cc = SG.certificate(p, Xc, bc)
        uq = SG.uniqueness_conditions(p, Xc, bc)
        ok = uq["valid"] and within(cc.gap, tolerance(cf["value"], rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL))
        claims.append(Check("minimiser-unique", Verdict.VERIFIED if ok else Verdict.INCONCLUSIVE,
                            ("the closed form is the unique minimiser (strictly complementary certificate, delta = "
                             f"{fmt(uq['delta'], 3)})") if ok else "uniqueness conditions not confirmed at the closed form",
                            {**uq, "closed_form_gap": cc.gap}))
        if ok:
            unique_how = HOW_GENERAL_UNIQUE
            geo_at = SG.geometry(p, Xc, bc)
        elif not cf.get("trivial") and p.lb == 0.0:
            # the face tolerances fail when the gradient's rounding is large relative to it (lambda ~ 1e-12): the
            # geometry certificate decides instead; balanced, exchangeable classes: the unique minimiser is invariant
            # under every class permutation, so with 1^T X* = 0 it is c J: a simplex ETF as soon as it is not zero
            with blas_threads(0):
                enc = SG.minimiser_enclosure(p, SG.dual_columns(p, Xc, bc, cc), cc.lower_bound, cc.upper)
            nonzero = enc["ok"] and enc["radius"] < enc["center_norm"]
            if enc["ok"] and enc["rank_bound"] <= p.d and nonzero and p.loss.exchangeable_key() is not None:
                claims[-1] = Check("minimiser-unique", Verdict.VERIFIED,
                                   f"unique in (Z, centred bias): {enc['uniqueness']}; rank <= {enc['rank_bound']} <= d; "
                                   f"proven radius {fmt(enc['radius'], 3)} < ||Xhat||_F = {fmt(enc['center_norm'], 3)} "
                                   "(the face tolerances of the closed-form route failed at this scale: "
                                   f"{', '.join(k for k, v in uq['conditions'].items() if not v)})",
                                   {**{k: v for k, v in enc.items() if k != 'center'}, "closed_form_gap": cc.gap})
                unique_how = (HOW_GEOMETRY_CERTIFICATE + "; balanced exchangeable classes: the unique minimiser is "
                              "invariant under every class permutation, hence c J, nonzero since the radius is below "
                              "the centre's norm: a simplex ETF")
                geo_at = SG.geometry(p, Xc, bc)
    else:
        # the geometry certificate: a proven enclosure of the unique minimiser from the value certificate's dual
        # point (docs/ufm_general.md, "Geometry certificate")
        with blas_threads(0):  # K x K SVDs: single-threaded BLAS is faster on the shared, loaded 2-core machine
            V = SG.dual_columns_grouped(p, pt, layout, cert) if pt is not None else SG.dual_columns(p, X, b, cert)
            enc = SG.minimiser_enclosure(p, V, lower, cert.upper)
            gcert = SG.geometry_enclosure(p, enc) if enc["ok"] else None
            polish_ok = mse_cf is None and (pt is not None or float(p.K) * p.G * min(p.K, p.G) <= GEOMETRY_POLISH_MAX_KGR)
            if gcert is not None and polish_ok and _geometry_halfwidth(gcert) > GEOMETRY_POLISH_FRACTION * GEOMETRY_TOL:
                # the radius grows like sqrt(gap): polish the candidate (bounded work) for a smaller gap
                used = int((sol.diagnostics or {}).get("evaluations") or 0)
                pol = _polish_for_geometry(p, layout, pt, X, b,
                                           min(GEOMETRY_POLISH_EVALS, max(GEOMETRY_POLISH_MIN_EVALS, used)))
                if pol is not None and pol[0].gap < cert.gap:
                    cert2, pt2, X2, b2, V2 = pol
                    enc2 = SG.minimiser_enclosure(p, V2, cert2.lower_bound, cert2.upper)
                    if enc2["ok"] and enc2["radius"] < enc["radius"]:
                        enc, cert, pt, X, b, lower = enc2, cert2, pt2, X2, b2, cert2.lower_bound
                        live.update(point=pt, X=X, b=b)
                        gcert = SG.geometry_enclosure(p, enc)
                        geo_full = SG.geometry(p, X, b)
                        geo_at = geo_full
                        diagnostics.append(f"geometry certificate: candidate polished for a smaller radius (certified "
                                           f"gap {fmt(cert.gap, 3)})")
        claims.extend(_geometry_certificate_claims(p, enc, gcert, cert, geometry_expected))
        if gcert is not None and enc["rank_bound"] <= p.d:
            unique_how = HOW_GEOMETRY_CERTIFICATE
            geo_at = dict(geo_full)
            for key in ("class_mean_cosines", "classifier_cosines", "class_mean_norms", "classifier_norms"):
                geo_at[key] = gcert[key]
            geo_at["geometry_enclosure"] = {k: v for k, v in gcert.items() if not k.startswith("_")}
            geo_at["enclosure"] = {k: v for k, v in enc.items() if k != "center"}
            if "minority" in gcert:
                geo_at["minority_intervals"] = gcert["minority"]
            mci = gcert["_intervals"]["mean_cos"]
            wci = gcert["_intervals"]["cls_cos"]
            geo_at["_cosines_full"] = (0.5 * (mci[0] + mci[1]), 0.5 * (wci[0] + wci[1]))
    mc, wc = geo_at.pop("_cosines_full", (None, None))
    geo_full.pop("_cosines_full", None)
    K = p.K
    if balanced and p.G == K and mc is None:
        expected = predicted.get("geometry", "simplex-etf") if cf is not None else "simplex-etf"
        claims.append(Check(f"geometry-{expected}", Verdict.INCONCLUSIVE, f"no geometry certificate: the class-mean "
                            f"Gram is not formed for K = {K} > {SG.EXPAND_MAX} classes", {"classes": K}))
    elif balanced and p.G == K:
        gram = np.asarray(mc)
        cls = G.classify_gram(gram if np.linalg.norm(gram) > 0 else np.zeros_like(gram))
        expected = predicted.get("geometry", "simplex-etf") if cf is not None else "simplex-etf"
        chk = geometry_is(f"geometry-{expected}", expected, cls)
        claims.append(at_certified_point(chk, value=cert.upper, lower_bound=lower,
                                         tol=tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL),
                                         unique=unique_how is not None, how=unique_how or ""))
    if "minority" in geo_at and not any(c.name == "minority-geometry" for c in claims):
        m = geo_at["minority"]
        chk = Check("minority-geometry", Verdict.VERIFIED, f"measured at the certified candidate: minority classifier "
                    f"cosine {fmt(m['minority_classifier_cosine'])}, classifier norm ratio "
                    f"{fmt(m['classifier_norm_ratio'])}", dict(m))
        claims.append(at_certified_point(chk, value=cert.upper, lower_bound=lower,
                                         tol=tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)))
    geometry = {**geo_at, "geometry_certificate": unique_how or "none (measured at the certified candidate)"}
    solution = {"value": cert.upper, "method": sol.method, "converged": sol.converged, "rank": rank,
                "seconds": sol.seconds, "start_values": sol.diagnostics.get("start_values")}
    return SolveReport("ufm", p.to_dict(), predicted, solution, cert.to_dict(), geometry, claims,
                       {"factored": sol.to_dict()}, diagnostics, seconds=time.perf_counter() - t0, live=live)


#: Geometry statements (docs/ufm_general.md, "Geometry certificate"): a cosine or a norm ratio "equals c" when
#: the proven interval of its value at every minimiser lies within c +- GEOMETRY_TOL (absolute; cosines and ratios
#: are O(1)). The hidden references quote class-mean cosines to 1e-4.
GEOMETRY_TOL = 1e-4
#: The candidate is polished when the widest proven interval is above this fraction of GEOMETRY_TOL.
GEOMETRY_POLISH_FRACTION = 0.25
#: Work budget of that polish: L-BFGS evaluations (a count, so the verdict does not depend on the machine's load):
#: the evaluations the solve itself used, between GEOMETRY_POLISH_MIN_EVALS and GEOMETRY_POLISH_EVALS (so the
#: geometry certificate costs about as much as the value certificate at most).
GEOMETRY_POLISH_EVALS = 5000
GEOMETRY_POLISH_MIN_EVALS = 3000
#: The class-reduced (ungrouped) polish costs ~4 K G r flops per evaluation: only up to K G r = 1e7 (~0.1 s of work
#: per 1000 evaluations); the exact imbalanced-MSE closed form is never polished (its gap is at the float floor).
GEOMETRY_POLISH_MAX_KGR = 1e7
HOW_GEOMETRY_CERTIFICATE = ("geometry certificate: the minimiser in (Z, centred bias) is unique (strict convexity of "
                            "the loss in the centred logits, KKT structure) and every minimiser lies within the proven "
                            "radius of the dual point's centre (Fenchel-Young gap <= certified gap; docs/ufm_general.md, "
                            "'Geometry certificate')")
GEOMETRY_SOURCE = ("derived in this project (docs/ufm_general.md, 'Geometry certificate'); the statements are those of "
                   "Fang et al., PNAS 2021 (minority collapse) and Hong & Ling 2023 (imbalanced geometry), as measured "
                   "quantities")


def _geometry_halfwidth(gcert: dict) -> float:
    """The widest proven half-width among the reported cosines and the minority measures."""
    hw = [gcert["class_mean_cosines_halfwidth"], gcert["classifier_cosines_halfwidth"]]
    for v in (gcert.get("minority") or {}).values():
        if isinstance(v, list) and len(v) == 2 and all(isinstance(x, float) for x in v):
            hw.append(0.5 * (v[1] - v[0]))
    return max(hw) if all(is_finite(h) for h in hw) else math.inf


def _polish_for_geometry(p, layout, pt, X, b, evals: int):
    """Re-solve from the candidate towards a gap at the float64 floor (``evals`` evaluations, gtol 0: the work
    budget or the certified-gap target ends it): (certificate, grouped point or None, X, b, dual columns), or None.
    Measured (counts 100,50,20,10,5,2,1, lambda 1e-3): the gap 2.8e-11 of the default stop falls to 2.8e-14 in 3000
    evaluations; a gradient tolerance stopped it at 3e-13."""
    try:
        with blas_threads(0):
            if pt is not None:
                sp = SG.solve_grouped(p, layout, starts=0, x_init=pt, gtol=0.0, target_gap_rtol=1e-15,
                                      max_evals=evals)
                pt2 = SG.clean_grouped(p, sp.variables["point"], layout)
                c2 = SG.certificate_grouped(p, pt2, layout)
                X2, b2 = SG.grouped_full(p, pt2, layout)
                return c2, pt2, X2, b2, SG.dual_columns_grouped(p, pt2, layout, c2)
            sp = SG.solve_factored(p, rank=min(p.K, p.G), starts=0, x_init=(X, b), max_evals=evals, gtol=0.0)
            X2 = SG.clean_candidate(p, sp.variables["X"], sp.variables["b"])
            c2 = SG.certificate(p, X2, sp.variables["b"])
            return c2, None, X2, sp.variables["b"], SG.dual_columns(p, X2, sp.variables["b"], c2)
    except (InputError, ValueError, np.linalg.LinAlgError):
        return None


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


def _geometry_certificate_claims(p, enc: dict, gcert: dict | None, cert, expected: dict | None) -> list[Check]:
    """``minimiser-unique`` (the enclosure proven and rank(X*) <= d proven), ``minority-geometry`` (imbalanced
    counts: the minority measures within GEOMETRY_TOL at every minimiser) and ``class-mean-cosines`` (every
    class-mean cosine within GEOMETRY_TOL), from :func:`SG.minimiser_enclosure` / :func:`SG.geometry_enclosure`.
    ``expected`` (tests, or a user's statement): {"minority_classifier_cosine": c, "classifier_norm_ratio": r,
    "mean_norm_ratio": r, "minority_mean_cosine": c, "class_mean_cosines": K x K} replaces the reported values."""
    expected = dict(expected or {})
    ev = {k: v for k, v in enc.items() if k != "center"}
    out: list[Check] = []
    if not enc["ok"]:
        st = SG.structural_uniqueness(p)
        vtol = tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
        if st["ok"] and within(cert.gap, vtol):
            out.append(Check("minimiser-unique", Verdict.VERIFIED,
                             f"unique in (Z, centred bias): {st['why']}; the optimum is certified (gap "
                             f"{fmt(cert.gap, 3)}); no proven radius ({enc.get('why')}), so no geometry statement",
                             {**ev, **st}))
        else:
            out.append(Check("minimiser-unique", Verdict.INCONCLUSIVE, f"no geometry certificate: {enc.get('why')}", ev))
        return out
    if enc["rank_bound"] > p.d:
        out.append(Check("minimiser-unique", Verdict.INCONCLUSIVE,
                         f"rank of the minimiser not proven <= d = {p.d}: the bound is {enc['rank_bound']} (structural "
                         f"{enc['rank_bound_structural']}, dual {enc['rank_bound_dual']}), so the factored minimisers "
                         "may differ from the relaxation's unique minimiser", ev))
        return out
    out.append(Check("minimiser-unique", Verdict.VERIFIED,
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
        out.append(Check("minority-geometry", v, "; ".join(c.reason for c in checks) or "no minority measure defined",
                         {"measures": {c.name: {"verdict": c.verdict.value, **c.evidence} for c in checks},
                          "source": GEOMETRY_SOURCE, "minority_classes": mino["minority_classes"],
                          "majority_classes": mino["majority_classes"]}))
    lo, hi = gcert["_intervals"]["mean_cos"]
    exp_c = expected.get("class_mean_cosines")
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
#: The collapsed candidate is polished (L-BFGS from it, gtol this factor times the default, at most
#: MINORITY_POLISH_EVALS evaluations) when its first radius is not below the tolerance but could be after the polish (the
#: radius is gap / delta; the default stop, gap <= 1e-11 x value, leaves gaps ~1e-10 relative near theta = 1 and
#: the polish brings them to ~5e-13 relative in < 1 s for CE; MINORITY_POLISH_GAP_FLOOR is that floor).
MINORITY_POLISH_GTOL_FACTOR = 1e-2
#: Work budget of that polish (L-BFGS evaluations; measured: < 1000 suffice for CE near theta = 1).
MINORITY_POLISH_EVALS = 4000
MINORITY_POLISH_GAP_FLOOR = 5e-13
HOW_MINORITY_RADIUS = ("dual margin on the group's sum-zero eigenspace: for the dual point y of the certificate at the "
                       "collapsed candidate, every (Z, b) has F(Z, b) - D(y) >= delta dev_a(Z), delta = lam - |y_a| "
                       "(docs/ufm_general.md, 'Minority collapse threshold'), so every minimiser has dev_a <= "
                       "(f_up - D(y)) / delta")


def _collapse_radius(p: "SG.GeneralUFM", layout, pt: "SG.GroupedPoint", a: int, f_up: float) -> dict:
    """The proven radius r >= dev_a(X*) of every minimiser X* from the dual margin at ``pt`` (None without a
    margin). f* <= f_up (a feasible value) is raised by the float-evaluation allowance of a value."""
    cm = SG.collapse_margin(p, pt, layout, a)
    up = min(f_up, cm["upper"]) if is_finite(cm["upper"]) else f_up
    up += ((2 * (p.K + p.G) + 16) * SG.UNIT_ROUNDOFF + SG.SPECTRAL_SLACK) * abs(up)
    gap = up - cm["lower_bound"] if is_finite(cm["lower_bound"]) else math.inf
    delta = cm["delta"]
    radius = gap / delta if is_finite(gap, delta) and delta > 0 else None
    return {"radius": radius, "margin_delta": delta, "dual_y_upper": cm["y_upper"],
            "margin_ratio": cm.get("margin_ratio"), "dual_value": cm["lower_bound"], "gap_for_radius": gap,
            "dual_scale_t": cm["scale_t"]}


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
    from solvers.losses import CrossEntropy, SquaredError

    t0 = time.perf_counter()
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
    failed = T.minority_collapse_hypotheses(gap)
    if failed:
        return hypothesis_fails("minority-collapse-threshold", "; ".join(failed), {"target_gap": gap})
    theta = T.minority_collapse_ratio(int(cnt[a]), p.N, p.lw, p.lh, weight=float(weights[layout.reps[a]]),
                                      target_gap=gap)
    predicted_collapse = theta <= threshold
    pinned = np.zeros(layout.m, dtype=bool)
    pinned[a] = True
    with blas_threads(0):
        sc = SG.solve_grouped(p, layout, starts=1, seed=seed, pinned=pinned, time_budget=time_budget)
    pt_c = sc.variables["point"]
    cc = SG.certificate_grouped(p, pt_c, layout, pinned=pinned)
    f_up, f_lo = cert.upper, cert.lower_bound
    tol = tolerance(f_up, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    d_up = cc.upper - f_lo  # >= min over collapsed points - f*
    d_lo = cc.lower_bound - f_up  # <= min over collapsed points - f*
    # the collapse side: a proven radius from the dual margin at the collapsed candidate (deviation 0 there)
    scale = max(pt_c.nuclear(layout), (float(layout.sizes[a]) - 1.0) * math.sqrt(float(cnt[a])))
    tau = tolerance(scale, rtol=MINORITY_DEV_RTOL, atol=0.0)
    rad = _collapse_radius(p, layout, pt_c, a, f_up)
    polished = False
    delta0 = rad["margin_delta"]
    if not (rad["radius"] is not None and within(rad["radius"], tau)) and is_finite(delta0, f_up) and delta0 > 0 \
            and MINORITY_POLISH_GAP_FLOOR * abs(f_up) / delta0 <= tau:
        if True:
            gt = MINORITY_POLISH_GTOL_FACTOR * 1e-11 * max(1e-3, min(1.0, 10 * math.sqrt(p.lam)))
            with blas_threads(0):
                sp = SG.solve_grouped(p, layout, starts=0, x_init=pt_c, pinned=pinned, gtol=gt,
                                      max_evals=MINORITY_POLISH_EVALS, time_budget=time_budget,
                                      target_gap_rtol=1e-14)
            rad2 = _collapse_radius(p, layout, sp.variables["point"], a, f_up)
            polished = True
            if rad2["radius"] is not None and (rad["radius"] is None or rad2["radius"] < rad["radius"]):
                rad = rad2
    ev = {"group": int(a), "group_count": int(cnt[a]), "group_size": int(layout.sizes[a]), "theta": theta,
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
    Y = _validate_targets(Y)
    N, m = Y.shape
    loss = SquaredError(Y.T, "squared-error (regression)")
    meta = {"targets_shape": [N, m], "targets_sha256": targets_sha256(Y)}
    if targets_path is not None:
        meta["targets_path"] = str(targets_path)
    if N * m <= INLINE_TARGETS_MAX:
        meta["targets"] = Y.tolist()
    p = SG.GeneralUFM(loss, m, np.ones(N, dtype=np.int64), np.arange(N), d, lw, lh, 0.0, "regression", meta)
    cf = SG.regression_closed_form(Y, p.lw, p.lh)
    claims: list[Check] = []
    diagnostics: list[str] = []
    pred_value = cf["value"] if claimed_value is None else float(claimed_value)
    predicted = {"value": cf["value"], "rank": cf["rank"], "threshold_N_lambda": cf["threshold"],
                 "singular_values_centred_targets": cf["singular_values"].tolist()[:50],
                 "source": "Andriopoulos et al. 2024 (neural regression collapse); docs/ufm_general.md"}
    if cf["rank"] > d:
        # the closed form is outside its hypothesis (d >= rank): NOT_APPLICABLE for the package's prediction. A
        # claimed value follows the rule of every route below the rank (check_general): REFUTED below the
        # relaxation's proven bound or above a value attained in dimension d, INCONCLUSIVE between. The rank-d point:
        # the soft-thresholded targets truncated to their d largest singular values (feasible with d features).
        claims.append(hypothesis_fails("optimal-value", f"d >= rank of the soft-thresholded targets: d = {d} < "
                                       f"{cf['rank']}"))
        cert = SG.certificate(p, cf["Z"], cf["b"], grads=_regression_residual(Y, cf))
        best = SG.convex_value(p, SG.truncate(cf["Z"], d), cf["b"])
        # the rank-d problem is decided by von Neumann's trace inequality: for rank Z <= d,
        # ||Z - Yc||^2 >= sum_j (z_j - s_j)^2 (sorted singular values), so the objective is >= the separable problem
        # in z with at most d nonzeros, whose minimum keeps the d largest: a proven lower bound of the rank-d optimum
        low_d = _von_neumann_rank_d(cf["singular_values"], cf["threshold"], p.lam, N, m, d)
        lower_d = max(low_d, cert.lower_bound)
        claims.append(_rank_d_value(best, lower_d, cert.lower_bound, d))
        if claimed_value is not None:
            chk = lower_bound_claim_general(float(claimed_value), lower_d, best)
            chk.evidence.update(rank_d_lower_bound=low_d, relaxation_lower_bound=cert.lower_bound,
                                bound="von Neumann's trace inequality: the rank-d problem is separable in the "
                                      "singular values (docs/ufm_general.md, 'Regression')")
            claims.append(chk)
        cert = SG.Certificate(lower_d, cert.upper, "rank-d bound (von Neumann) and relaxation dual", cert.details)
        sol_d = {"value": best, "method": "closed form truncated to rank d (feasible in dimension d)", "rank_limit": d}
        return SolveReport("ufm-regression", p.to_dict(), {**predicted, "value": None, "note": "no prediction: d is "
                           "below the rank of the soft-thresholded targets"}, sol_d, _below_rank_certificate(cert, best),
                           {}, claims, {}, diagnostics, seconds=time.perf_counter() - t0)
    # the residual of the closed form from the SVD, -U min(s, N lam) V^T: computing Z + b - Y in floats cancels to
    # ~u absolute per entry, which at lambda ~ 1e-9 and below is larger than the gap the value needs
    cert = SG.certificate(p, cf["Z"], cf["b"], grads=_regression_residual(Y, cf))
    cert_plain = SG.certificate(p, cf["Z"], cf["b"])
    if cert_plain.lower_bound > cert.lower_bound:
        cert = cert_plain
    routes = {}
    attained = cert.upper
    if factored and N * m <= 200_000:
        with blas_threads(0):
            sol = SG.solve_factored(p, rank=min(d, m, N), starts=1, seed=seed)
        routes["factored"] = sol.to_dict()
        attained = min(attained, sol.value)
        if sol.value < cert.upper - tolerance(cert.upper, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL):
            diagnostics.append("the factored solver found a lower value than the closed form")
    tol = tolerance(pred_value, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    claims.append(optimum_matches("optimal-value", pred_value, attained=attained, lower_bound=cert.lower_bound,
                                  tol=tol, certificate=cert.method))
    # uniqueness: squared error is strictly convex in the logits, so U* is unique; Z* 1 = 0 at every minimiser
    # (KKT: the right singular vectors of Z* lie in the row space of the gradient, orthogonal to 1): Z* unique
    claims.append(Check("minimiser-unique", Verdict.VERIFIED if within(cert.gap, tol) else Verdict.INCONCLUSIVE,
                        "strictly convex loss: every minimiser has the same logits U*, and Z* = U* (I - 11^T/N) "
                        "(docs/ufm_general.md, 'Regression')", {"gap": cert.gap}))
    Z = cf["Z"]
    q = math.sqrt(p.lh / p.lw)
    # W W^T = q (Z Z^T)^{1/2} = q U S U^T from the thin SVD of Z (m x N): never an m x m matrix unless it is
    # printed (m <= 50); an audit saw 9.5 GB for m = 20 000 targets with the m x m square root
    U_, s_, _ = np.linalg.svd(Z, full_matrices=False)
    nrm = np.sqrt(np.clip(q * ((U_ * U_) @ s_), 0.0, None))
    C = SG._cos(q * (U_ * s_) @ U_.T)[1] if m <= 50 else None
    WW = q * (U_ * s_) @ U_.T if m <= 50 else None
    geometry = {"classifier_gram": WW.tolist() if WW is not None else None, "classifier_norms": nrm.tolist()[:1000],
                "classifier_cosines": C.tolist() if C is not None else None, "feature_rank": cf["rank"],
                "note": "W W^T = sqrt(lh/lw) (Z Z^T)^{1/2}, H^T H = sqrt(lw/lh) (Z^T Z)^{1/2}: features lie in the "
                        "rank-r subspace of the top centred-target directions (Andriopoulos et al. 2024)",
                "geometry_certificate": "unique Z* (strict convexity) at the exact closed form"}
    solution = {"value": cert.upper, "method": "closed form (singular-value soft thresholding)", "converged": True}
    return SolveReport("ufm-regression", p.to_dict(), predicted, solution, cert.to_dict(), geometry, claims, routes,
                       diagnostics, seconds=time.perf_counter() - t0)


def _rank_d_value(best: float, lower_d: float, relaxation_lower: float, d: int) -> Check:
    """``rank-d-value``: the optimum with d features (below the rank of the closed form) is the soft-thresholded
    targets truncated to their d largest singular values: attained there (``best``, the objective at that feasible
    point) and proven from below by von Neumann's trace inequality (``lower_d``)."""
    tol = tolerance(best, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    return optimum_matches("rank-d-value", best, attained=best, lower_bound=lower_d, tol=tol,
                           certificate="rank-d bound (von Neumann's trace inequality)",
                           evidence={"prediction": "the closed form truncated to its d largest singular values",
                                     "relaxation_lower_bound": relaxation_lower, "d": d})


def _von_neumann_rank_d(sv: np.ndarray, thr: float, lam: float, N: int, m: int, d: int) -> float:
    """A proven lower bound (float allowances included) of min over rank(Z) <= d of (1/(2N))||Z - Yc||_F^2 +
    lam ||Z||_*, Yc with singular values ``sv`` (sorted, descending): by von Neumann's trace inequality
    ||Z - Yc||^2 >= sum_j (z_j - s_j)^2, so the problem is separable in z with at most d nonzeros and keeps the d
    largest soft-thresholded values (docs/ufm_general.md, 'Regression')."""
    head, tail = sv[:d], sv[d:]
    low = float(np.sum(np.minimum(head, thr) ** 2) / (2 * N) + lam * np.sum(np.maximum(head - thr, 0.0))
                + np.sum(tail ** 2) / (2 * N))
    s_err = 4.0 * max(N, m) * SG.UNIT_ROUNDOFF * float(sv[0]) if sv.size else 0.0
    return low - 16 * (N + m) * SG.UNIT_ROUNDOFF * abs(low) - float(np.sum(sv / N + lam)) * s_err


def _regression_residual(Y: np.ndarray, cf: dict) -> np.ndarray:
    """The gradient of the closed form, Z + b 1^T - Y^T = -U min(s, N lam) V^T (m x N), from the SVD of the centred
    targets: computing it as a difference cancels to ~u absolute per entry, more than the value's tolerance at
    lambda <= 1e-9."""
    Yc = (Y - Y.mean(axis=0)).T
    Uy, sy, Vty = np.linalg.svd(Yc, full_matrices=False)
    return -(Uy * np.minimum(sy, cf["threshold"])) @ Vty


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

def estimate_value(p: "SG.GeneralUFM", starts: int = 1) -> float:
    """Estimated seconds of :func:`certify_value` (0 when a balanced closed form is certified directly)."""
    balanced = bool(np.all(p.counts == p.counts[0])) and p.kind == "classification"
    if balanced and p.lb == 0.0 and p.loss.closed_form(p.K, int(p.counts[0]), p.lam) is not None \
            and not closed_form_hypotheses(p.loss):
        return 0.0
    layout = SG.class_layout(p)
    if layout is None:
        return SG.estimate(p, starts)["seconds"]
    m = float(layout.m)
    return starts * SG.GROUPED_EVALS * (SG.GROUPED_EVAL_OVERHEAD + SG.GROUPED_FLOPS_M3 * m ** 3 / SG.FLOPS_PER_SECOND)


def certify_value(p: "SG.GeneralUFM", *, starts: int = 1, seed: int = 0, time_budget: float | None = None) -> dict:
    """The optimal value of one instance (d >= the rank of the optimum) with its certificate, as numbers:
    ``value`` (objective at an explicit feasible point: an upper bound), ``lower_bound`` (proven, Fenchel dual;
    docs/ufm_general.md), ``gap``, ``certified`` (the claim ``optimal-value`` is VERIFIED: gap within
    GEN_VALUE_RTOL and, where a closed form exists, the closed form inside the bracket), ``closed_form``
    (value or None), ``margin``, ``phase``, and the minority-collapse measures at the certified point
    (imbalanced counts; a measurement at the candidate, not a statement about every minimiser).

    Balanced classes with a closed form: the candidate is the closed form's point itself (one group, O(K) work).
    Otherwise the grouped (or, without exchangeable classes, the class-reduced) solver and its certificate."""
    balanced = bool(np.all(p.counts == p.counts[0])) and p.kind == "classification"
    cf = p.loss.closed_form(p.K, int(p.counts[0]), p.lam) if balanced and p.lb == 0.0 else None
    if cf is not None and closed_form_hypotheses(p.loss):
        cf = None  # outside the closed form's hypothesis: the certified value is the row's value
    layout = SG.class_layout(p)
    pt = None
    out: dict = {"closed_form": None, "margin": None, "phase": None}
    if cf is not None and layout is not None and layout.m == 1:
        pt = _closed_form_grouped(p, cf)
        cert = SG.certificate_grouped(p, pt, layout)
        how = "closed form's point"
    else:
        est = estimate_value(p, starts)
        if est > TIME_LIMIT_S:
            raise InputError(f"instance too large for a certified value: {work_text(est, TIME_LIMIT_S)} "
                             "(docs/ufm_general.md, 'Budgets')")
        with blas_threads(0):
            if layout is not None:
                sol = SG.solve_grouped(p, layout, starts=starts, seed=seed, time_budget=time_budget)
                pt = SG.clean_grouped(p, sol.variables["point"], layout)
                cert = SG.certificate_grouped(p, pt, layout)
            else:
                sol = SG.solve_factored(p, rank=min(p.K, p.G), starts=starts, seed=seed, time_budget=time_budget)
                sol.variables["X"] = SG.clean_candidate(p, sol.variables["X"], sol.variables["b"])
                cert = SG.certificate(p, sol.variables["X"], sol.variables["b"])
        how = sol.method
    if cf is not None:
        out.update(closed_form=cf["value"], margin=cf["margin"], phase="trivial" if cf["trivial"] else "collapse")
    pred = cf["value"] if cf is not None else cert.upper
    tol = tolerance(pred, rtol=GEN_VALUE_RTOL, atol=GEN_VALUE_ATOL)
    chk = optimum_matches("optimal-value", pred, attained=cert.upper, lower_bound=cert.lower_bound, tol=tol,
                          certificate=cert.method)
    out.update(value=cert.upper, lower_bound=cert.lower_bound, gap=cert.gap, certified=chk.verdict == Verdict.VERIFIED,
               verdict=chk.verdict.value if hasattr(chk.verdict, "value") else str(chk.verdict), reason=chk.reason,
               tolerance=tol, candidate=how, certificate=cert.method,
               # the certified candidate, for `table ufm --rigorous` (the ball recipe bounds it: no second solve)
               live={"problem": p, "layout": layout, "point": pt,
                     "X": None if pt is not None else sol.variables["X"], "b": None if pt is not None else sol.variables["b"]})
    if p.kind == "classification" and np.unique(p.counts).size > 1:
        if pt is not None:
            geo = SG.geometry_grouped(p, pt, layout)
        else:
            geo = SG.geometry(p, sol.variables["X"], sol.variables["b"])
        mino = geo.get("minority") or {}
        out.update(minority_classifier_cosine=mino.get("minority_classifier_cosine"),
                   classifier_norm_ratio=mino.get("classifier_norm_ratio"))
    return out
