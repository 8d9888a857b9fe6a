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
from solvers import ufm_general as SG
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


# The any-loss engine's checks (`solve ufm`, `solve ufm-regression`, `table ufm`) live in
# proofs_check/claims/ufm_general.py; their former import path (this module) keeps working.
from proofs_check.claims.ufm_general import (  # noqa: E402,F401
    GEN_VALUE_ATOL, GEN_VALUE_RTOL, GEOMETRY_TOL, MAX_TARGET_ENTRIES, MINORITY_DEV_RTOL, certify_value,
    check_general, check_regression, closed_form_hypotheses, estimate_value, lower_bound_claim_general,
    minority_collapse_check)
