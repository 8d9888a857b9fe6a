"""Supervised contrastive loss: the one entry point that walks an instance through the SCL engine.

:func:`solve_instance` decides the routes (certificate first, docs/scl.md "Certificate first"), runs them and
returns an :class:`SCLResult`: the point (the factored search's, or the predicted collapsed configuration when
the cheap proven bounds certify it), its certificate (the best proven lower bound, the route that proved it, its
allowance, every route tried), the geometry certificate at the predicted configuration, the geometry evidence
and the diagnostics saying which routes were skipped or refused and why. It states nothing about a theorem and
returns no verdict: ``proofs_check.claims.scl`` states the statements and judges them from this result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from solvers.common import Solution
from solvers.scl_batching import compile_batching, scl_loss
from solvers.scl_dual import (GramCertificate, collapsed_certificate, etf_closed_form_certificate, gram_certificate,
                              loss_rounding, of_closed_form_certificate)
from solvers.scl_factored import solve_factored
from solvers.scl_reduced import (MAX_CERTIFICATE_SAMPLES, class_mean_gram, class_reduced_dual, gram_relaxation,
                                 reduced_candidates)
from theory import scl as T
from theory.geometry import class_means, classify_gram, cosine_matrix, nc_metrics, within_class_max_deviation
from theory._validate import InputError, at_most as _at_most, finite as _finite

#: Round-off of one anchor term of the loss in units of eps * (1/tau + log N + 1) (measured <= 1.3,
#: (3,3,3) at tau = 1e-4; 64 leaves a wide margin and is still < 1e-9 relative at tau >= 1e-2).
LOSS_ROUNDOFF_ULPS = 64.0
#: Relative part of the default route tolerance of :func:`solve_instance` (whether the cheap bounds close the gap
#: at the predicted configuration, so no factored search is needed): the value tolerance of the SCL claims
#: (``proofs_check.claims.scl.VALUE_RTOL``), which pass their own tolerance function.
ROUTE_RTOL = 1e-9
#: The factored solver's perturbation restarts stop once its value is this close (relative) to the
#: cheap proven bound (a stopping rule of an auxiliary route, not a verdict tolerance).
HOP_RTOL = 1e-6
HOP_ATOL = 1e-8
#: Seconds the factored solver may run inside one instance check (the certificates need the rest of
#: the ~2 minute budget; theory.scl.TIME_LIMIT_S).
SOLVER_TIME_BUDGET_S = 90.0
#: Certificate first (issue: the factored solve used to run a fixed 10 s whose result was discarded): where the
#: predicted closed form is certified by the cheap bounds, the factored solve is a bounded confirmation of at most
#: CONFIRM_MAX_ITERS L-BFGS iterations and CONFIRM_WORK_FLOPS flops of loss evaluations (a work budget: the same
#: verdict at any machine load; ~3 s at the ~1e9 flop/s measured on the 2-core machine), skipped below
#: CONFIRM_MIN_ITERS iterations. WALL_SAFETY_S is only a safety net, far above the work budget.
#: The factored solve (--method factored, or when no certificate closes): SOLVER_WORK_FLOPS of loss evaluations in
#: all (0.75 x the 120 s x 5e8 flop/s limit of theory.scl.check_budget), per run between SOLVER_MIN_ITERS and
#: SOLVER_MAX_ITERS L-BFGS iterations (measured 50-260 evaluations per converged start at N = 200).
SOLVER_WORK_FLOPS = 4.5e10
#: L-BFGS-B's own work per evaluation, per variable (N d), in flop-equivalents of the same cost model (its two-loop
#: recursion over the correction pairs, the bounds and the sphere map). The loss alone undercounted mini-batch
#: instances: N = 1500, d = 3 in 1497 batches of 3 took 10 ms per evaluation (the loss 1.6 ms, ~2 us per variable
#: besides), so 6 starts x 5000 iterations ran for minutes where the budget meant ~90 s.
OPTIMISER_FLOPS_PER_VARIABLE = 1000.0
SOLVER_MIN_ITERS = 50
SOLVER_MAX_ITERS = 5000
CONFIRM_MAX_ITERS = 200
CONFIRM_MIN_ITERS = 20
CONFIRM_WORK_FLOPS = 3e9
WALL_SAFETY_S = 600.0
#: Within-class deviation at the solver's point reported as "collapsed" in the geometry evidence (a measurement,
#: not a statement; the claims' COLLAPSE_TOL).
EVIDENCE_COLLAPSE_TOL = 1e-4


def loss_roundoff(inst: T.SCLInstance) -> float:
    """Round-off bound of the loss evaluated in float64 at a feasible point of ``inst``: every anchor
    term (one per sample and batch holding it) is a log-sum-exp of logits of size <= 1/tau."""
    anchors = inst.N if inst.batches is None else sum(len(b) for b in inst.batches)
    return LOSS_ROUNDOFF_ULPS * float(np.finfo(float).eps) * anchors * (1.0 / inst.tau + np.log(max(inst.N, 2)) + 1.0)


def route_tolerance(inst: T.SCLInstance) -> Callable[[float, float], float]:
    """The default tolerance (value, allowance) -> ROUTE_RTOL |value| + loss round-off + allowance."""
    return lambda v, a=0.0: ROUTE_RTOL * abs(float(v)) + loss_roundoff(inst) + max(0.0, float(a or 0.0))


class BoundRoutes:
    """The best proven lower bound found for an instance, where it came from, and its allowance; ``routes``:
    every route offered (its bound, allowance and details)."""

    def __init__(self):
        self.value: float | None = None
        self.allowance = 0.0
        self.route = None
        self.routes: dict = {}

    def offer(self, name: str, value, allowance: float = 0.0, **info):
        self.routes[name] = {"lower_bound": value, "allowance": allowance, **info}
        if _finite(value) and (self.value is None or value > self.value):
            self.value, self.allowance, self.route = float(value), float(allowance), name


def center_gram(inst: T.SCLInstance, face: str) -> np.ndarray:
    """The N x N Gram of the predicted collapsed configuration ``face`` (OF or simplex ETF)."""
    if face == "orthogonal-frame":
        return T.of_gram(inst.counts)
    H = T.etf_features(inst.counts, max(inst.k - 1, 1))
    return H.T @ H


def predicted_face(inst: T.SCLInstance) -> str | None:
    """The collapsed configuration the certificates are built at: the OF for UFM+ with d >= k, the simplex ETF for
    balanced full-batch UFM (n >= 2) with d >= k - 1; None otherwise (no closed-form candidate)."""
    if inst.nonneg:
        return "orthogonal-frame" if inst.d >= inst.k else None
    balanced = inst.full_batch and inst.balanced and inst.counts[0] >= 2
    return "simplex-etf" if balanced and inst.d >= inst.k - 1 else None


def certify_instance(inst: T.SCLInstance, H: np.ndarray | None, *, face: str | None = None, solver: str = "CLARABEL",
                     upper: float | None = None, diagnostics: list | None = None, reduced=None, exact_face=None,
                     conic: bool = True, tol: Callable[[float, float], float] | None = None):
    """Proven lower bound on the instance's loss (every route's bound is a repaired dual point, see
    solvers.scl.gram_certificate / class_reduced_dual / of_closed_form_certificate), and the geometry certificate
    at the predicted collapsed configuration ``face`` when one is asked for. ``reduced``: a class-reduced dual
    already computed (reused instead of recomputed); ``exact_face``: the closed-form dual point at the face (it
    replaces the dense N x N certificate at the face: exact, O(k)); ``conic=False`` skips the conic route, which
    otherwise runs when the cheap bounds leave ``upper`` more than ``tol(upper, allowance)`` above them
    (default :func:`route_tolerance`). Returns (BoundRoutes, GramCertificate | None)."""
    diagnostics = diagnostics if diagnostics is not None else []
    tol = tol or route_tolerance(inst)
    bounds = BoundRoutes()
    y = inst.labels
    N, tau, nonneg = inst.N, inst.tau, inst.nonneg
    face_cert = None
    if inst.full_batch:  # the class-reduced dual: O(k^3), valid at any candidate
        if reduced is not None and H is None:
            red = reduced
        else:
            red = class_reduced_dual(inst.counts, tau, nonneg=nonneg, candidates=reduced_candidates(inst, H))
        best = max((a for a in red.attempts if _finite(a["lower_bound"])), key=lambda a: a["lower_bound"], default=None)
        bounds.offer("class-reduced dual", red.value, best["allowance"] if best else 0.0,
                     method="linearisation dual of the k x k class-reduced relaxation at candidate class matrices")
    if exact_face is not None and face is not None:
        bounds.offer("closed-form dual point at the predicted " + face, exact_face.lower_bound, 0.0,
                     method=exact_face.method)
        face_cert = exact_face
    if N <= T.GRAM_CERT_MAX:
        centers = []
        if face is not None and exact_face is None:
            centers.append(("dual at the predicted " + face, center_gram(inst, face), face))
        if H is not None:
            centers.append(("dual at the solver's point", H.T @ H, None))
        for name, G0, fc in centers:
            try:
                c = gram_certificate(G0, y, inst.batches, tau, nonneg=nonneg, face=fc, counts=inst.counts, method=name)
            except np.linalg.LinAlgError as exc:  # an eigensolver failure is route trouble, not a verdict
                diagnostics.append(f"{name}: eigensolver failed ({exc})")
                continue
            bounds.offer(name, c.lower_bound, c.allowance, psd_shift=c.psd_shift, complementarity=c.complementarity)
            if fc is not None:
                face_cert = c
    elif exact_face is None:
        diagnostics.append(f"N = {N} > {T.GRAM_CERT_MAX}: no N x N Gram certificate (geometry not certified)")
    tight = bounds.value is not None and upper is not None and _at_most(upper - bounds.value, tol(upper, bounds.allowance))
    if conic and not tight and N <= MAX_CERTIFICATE_SAMPLES:
        cones = T.estimate_cost(inst)["exp_cones"]
        if cones <= T.CONIC_MAX_CONES:
            rel = gram_relaxation(inst.counts, inst.batches, tau, nonneg=nonneg, solver=solver)
            for w in rel.warnings[:3]:
                diagnostics.append(f"conic solver warning: {w}")
            bounds.offer("dual at the conic solver's point", rel.value, 0.0, status=rel.status,
                         solver_objective=rel.objective, seconds=rel.seconds)
            if not rel.ok:
                diagnostics.append(f"conic route gave no bound (status {rel.status})")
        else:
            diagnostics.append(f"conic route skipped: {cones} exponential cones > {T.CONIC_MAX_CONES}")
    return bounds, face_cert


def better_etf_certificate(inst: T.SCLInstance, face_cert):
    """Balanced full-batch UFM (n >= 2): the closed-form dual point at the collapsed ETF
    (etf_closed_form_certificate: exact complementarity, E = eps) when it gives a smaller Gram
    radius than the numeric one (it does wherever the numeric margin drowns in round-off, e.g. tau <= 0.1)."""
    if inst.nonneg or not inst.full_batch or not inst.balanced or inst.counts[0] < 2 or inst.k < 2:
        return face_cert
    cf = etf_closed_form_certificate(inst.counts, inst.tau)
    bc = cf.bounds(0.0)
    bn = face_cert.bounds(0.0) if face_cert is not None and face_cert.face is not None else None
    if bc is not None and (bn is None or bc["gram_radius"] < bn["gram_radius"]):
        return cf
    return face_cert


def collapsed_evidence(inst: T.SCLInstance, H: np.ndarray) -> dict:
    """Imbalanced full-batch UFM: the solver's point ``H`` polished into a collapsed candidate and certified
    (:func:`solvers.scl_dual.collapsed_certificate`). Returns ``{"A_sol", "cert", "why"}``: the class-mean Gram at
    the solver's point, the certificate (None when no route applies or the eigensolver failed) and why not."""
    A_sol = class_mean_gram(H, inst.labels)
    if inst.nonneg or not inst.full_batch or inst.N > T.GRAM_CERT_MAX:
        why = (f"N = {inst.N} > {T.GRAM_CERT_MAX}: no N x N Gram certificate" if inst.N > T.GRAM_CERT_MAX
               else "the collapsed-candidate certificate is for full-batch UFM")
        return {"A_sol": A_sol, "cert": None, "why": why}
    try:
        return {"A_sol": A_sol, "cert": collapsed_certificate(inst.counts, inst.tau, A_sol), "why": ""}
    except np.linalg.LinAlgError as exc:
        return {"A_sol": A_sol, "cert": None, "why": f"eigensolver failed ({exc})"}


def solver_iterations(inst, starts: int, hops: int) -> int:
    """L-BFGS iterations per run (start or hop) of the factored solve: SOLVER_WORK_FLOPS of loss evaluations shared
    by starts + hops runs, clamped to [SOLVER_MIN_ITERS, SOLVER_MAX_ITERS]. A work budget: the same command stops at
    the same iterate at any machine load (the wall-clock limit is only a safety net)."""
    ev = T.estimate_cost(inst)["eval_flops"] + OPTIMISER_FLOPS_PER_VARIABLE * inst.N * inst.d
    return int(max(SOLVER_MIN_ITERS, min(SOLVER_MAX_ITERS, SOLVER_WORK_FLOPS / (max(ev, 1.0) * (starts + hops)))))


def _solve(inst, *, starts, seed, hops, hop_until, backend_opts, time_budget):
    hops = hops if inst.full_batch and hop_until is not None else 0
    return solve_factored(inst, starts=starts, seed=seed, hops=hops, hop_until=hop_until,
                          maxiter=solver_iterations(inst, starts, hops),
                          time_budget=max(float(time_budget), WALL_SAFETY_S), **(backend_opts or {}))


@dataclass
class SCLResult:
    """What :func:`solve_instance` found for one instance (data, never a verdict).

    ``sol``: the factored search's Solution (None when the certificate decided and no confirmation ran);
    ``confirmation``: the bounded confirmation solve's budget and value when the certificate came first;
    ``feasible``: value of every feasible configuration evaluated (``solver``, ``orthogonal frame``, ``collapsed
    ETF``, ...), ``upper`` the smallest and ``upper_from`` its name; ``bounds``: the proven lower bound, its route
    and allowance, every route tried; ``face`` / ``face_cert``: the predicted collapsed configuration and the
    geometry certificate there (None: no closed-form candidate or no certificate); ``geometry``: evidence measured at
    the point (the solver's, or the certified center); ``diagnostics``: routes skipped or refused, and why."""

    face: str | None
    feasible: dict
    bounds: BoundRoutes
    face_cert: GramCertificate | None
    sol: Solution | None
    certified_first: bool
    confirmation: dict | None
    geometry: dict
    diagnostics: list = field(default_factory=list)
    collapsed: dict | None = None  # imbalanced full-batch UFM: :func:`collapsed_evidence` at the solver's point

    @property
    def H(self) -> np.ndarray | None:
        return self.sol.variables["H"] if self.sol is not None else None

    @property
    def upper_from(self) -> str | None:
        return min(self.feasible, key=self.feasible.get) if self.feasible else None

    @property
    def upper(self) -> float | None:
        return self.feasible[self.upper_from] if self.feasible else None

    @property
    def converged(self) -> bool:
        return self.sol.converged if self.sol is not None else True

    @property
    def certificate(self) -> dict:
        b = self.bounds
        return {"lower_bound": b.value, "gap": None if b.value is None else self.upper - b.value,
                "upper": self.upper, "upper_from": self.upper_from, "method": b.route, "allowance": b.allowance,
                "routes": b.routes}

    @property
    def solution(self) -> dict:
        if self.sol is not None:
            return {**self.sol.to_dict(), "start_values": self.sol.diagnostics.get("start_values")}
        return {"value": self.upper, "method": "closed form certified (no factored solve: --method factored runs one)",
                "converged": True, "seconds": 0.0}


def _closed_form_values(inst: T.SCLInstance) -> dict:
    """Loss of the predicted configurations that exist at dimension d (the OF from its Gram: no d x N product, at
    k = 1000 that product alone is 8e9 flops)."""
    y, tau, d, k = inst.labels, inst.tau, inst.d, inst.k
    feasible = {}
    if inst.nonneg and d >= k:
        feasible["orthogonal frame"] = scl_loss(T.of_gram(inst.counts), y, inst.batches, tau, gram=True, grad=False)
    elif inst.nonneg and inst.full_batch and d >= T.required_dim_for_bound(inst.counts):
        feasible["shared singletons"] = scl_loss(T.shared_singletons_features(inst.counts, d), y, None, tau, grad=False)
    if not inst.nonneg and d >= k - 1 and k >= 2:
        feasible["collapsed ETF"] = scl_loss(T.etf_features(inst.counts, d), y, inst.batches, tau, grad=False)
    return feasible


def _confirmation_solve(inst, seed, backend_opts, diagnostics):
    """The bounded confirmation of a certified closed form (work budget in evaluations): (Solution | None, iters)."""
    ev_flops = T.estimate_cost(inst)["eval_flops"]
    iters = int(min(CONFIRM_MAX_ITERS, CONFIRM_WORK_FLOPS / max(ev_flops, 1.0)))
    if iters >= CONFIRM_MIN_ITERS:
        return solve_factored(inst, starts=1, seed=seed, hops=0, maxiter=iters, time_budget=WALL_SAFETY_S,
                              **(backend_opts or {})), iters
    diagnostics.append(f"confirmation solve skipped: {CONFIRM_MIN_ITERS} iterations of ~{ev_flops:.3g} flops "
                       f"exceed its work budget of {CONFIRM_WORK_FLOPS:.3g} flops (the certificate decides; "
                       "--method factored runs the solver)")
    return None, iters


def _geometry_evidence(inst: T.SCLInstance, H: np.ndarray | None, face: str | None) -> dict:
    """Geometry measured at the solver's point, or (certificate first, no solve) at the certified center."""
    y, k = inst.labels, inst.k
    if H is not None:
        cls = classify_gram(class_mean_gram(H, y))
        dev = within_class_max_deviation(H, y)
        return {"classification": cls.classification, "distance_etf": cls.distance_etf, "distance_of": cls.distance_of,
                "class_mean_cosines": cosine_matrix(class_means(H, y)) if k <= 200 else None,
                "metrics": nc_metrics(H, y).to_dict(), "within_class_max_deviation": dev,
                "collapsed": bool(dev <= EVIDENCE_COLLAPSE_TOL), "note": "measured at the solver's point (not a statement)"}
    M0 = np.eye(k) if face == "orthogonal-frame" else (
        k / (k - 1.0) * (np.eye(k) - 1.0 / k) if face == "simplex-etf" else None)
    cls = classify_gram(M0) if M0 is not None else None
    return {"classification": None if cls is None else cls.classification,
            "distance_etf": None if cls is None else cls.distance_etf,
            "distance_of": None if cls is None else cls.distance_of, "within_class_max_deviation": 0.0,
            "note": f"no factored solve (certificate first): the certified center, the collapsed {face}"}


def _radius_cross_check(inst, sol, face_cert, diagnostics):
    """The solver's point against the proven radius (a cross-check of the certificate; never decides)."""
    if sol is None or face_cert is None or face_cert.face is None or inst.N > T.GRAM_CERT_MAX:
        return
    H = sol.variables["H"]
    G0 = center_gram(inst, face_cert.face)
    eps = max(0.0, sol.value - face_cert.center_value)
    b = face_cert.bounds(eps)
    if b is not None:
        dist = float(np.linalg.norm(H.T @ H - G0))
        if dist > b["gram_radius"] * (1 + 1e-9) + 1e-9 * max(1.0, float(inst.N)):  # + the float Gram's rounding
            diagnostics.append(f"solver point is {dist:.3g} from the certified center, beyond the proven radius "
                               f"{b['gram_radius']:.3g} for its value excess {eps:.3g}: certificate defect?")


def solve_instance(inst: T.SCLInstance, *, starts: int = 6, seed: int = 0, hops: int = 20, solver: str = "CLARABEL",
                   backend_opts: dict | None = None, time_budget: float = SOLVER_TIME_BUDGET_S, method: str = "auto",
                   tol: Callable[[float, float], float] | None = None) -> SCLResult:
    """Find and certify the minimum of one SCL instance; the one entry point of the SCL engine.

    Routes, in order: the feasible closed forms at dimension d (OF, shared singletons, collapsed ETF); the cheap
    proven bounds at the predicted collapsed configuration (:func:`predicted_face`): the class-reduced dual at the
    predicted class matrix (full batch), the closed-form dual point at the OF (UFM+ full batch) or the dense Gram
    dual at the predicted configuration (mini-batch, N <= theory.scl.GRAM_CERT_MAX). With ``method="auto"``, when
    they certify the closed form within ``tol(value, allowance)`` (default :func:`route_tolerance`), the factored
    search runs only as a bounded confirmation (CONFIRM_WORK_FLOPS; skipped when one evaluation exceeds it) and
    its value is returned in ``confirmation``; otherwise (``method="factored"``, or no certificate closes) the
    multi-start factored search runs under its work budget (theory.scl.check_budget; an InputError when it is
    refused and no cheap bound exists) with basin hopping until the class-reduced bound is reached, and every
    route is tried at its point (:func:`certify_instance`, the conic relaxation for small N). ``time_budget`` is a
    wall-clock safety net only (WALL_SAFETY_S at least); the budgets that decide count work."""
    diagnostics: list[str] = []
    tol = tol or route_tolerance(inst)
    y, tau = inst.labels, inst.tau
    face = predicted_face(inst)
    feasible = _closed_form_values(inst)
    closed = min(feasible.values(), default=None)
    hop_until, pre, exact_face, first = None, None, None, None
    if inst.nonneg and inst.full_batch and face == "orthogonal-frame":
        exact_face = of_closed_form_certificate(inst.counts, tau, F0=feasible["orthogonal frame"],
                                                F0_rounding=loss_rounding(compile_batching(y, None), tau))
    if inst.full_batch:
        pre = class_reduced_dual(inst.counts, tau, nonneg=inst.nonneg, candidates=reduced_candidates(inst))
        if pre.ok:
            hop_until = pre.value + HOP_ATOL + HOP_RTOL * abs(pre.value)
    certified_first = False
    if method == "auto" and closed is not None and face is not None:
        if inst.full_batch:
            first = certify_instance(inst, None, face=face, solver=solver, upper=closed, diagnostics=[], reduced=pre,
                                     exact_face=exact_face, conic=False, tol=tol)
        elif inst.N <= T.GRAM_CERT_MAX:
            first = certify_instance(inst, None, face=face, solver=solver, upper=closed, diagnostics=[], conic=False,
                                     tol=tol)
        certified_first = first is not None and _finite(first[0].value) and _at_most(
            closed - first[0].value, tol(closed, first[0].allowance))
    sol, confirmation = None, None
    # d below the dimension the closed forms need (k - 1, or k with nonnegative features): the theorems' value and
    # geometry statements do not apply and the class-reduced dual proves the lower bound, so no statement needs the
    # multi-start search; a bounded confirmation supplies the best value found (--method factored runs the search)
    small_d = method == "auto" and pre is not None and pre.ok and T.dimension_below_closed_forms(inst)
    if certified_first or small_d:
        if small_d:
            diagnostics.append(f"d = {inst.d} is below the closed forms' dimension: the class-reduced dual proves "
                               "the lower bound and the multi-start search is not needed (a bounded confirmation "
                               "gives the best value found; --method factored runs the search)")
        sol, iters = _confirmation_solve(inst, seed, backend_opts, diagnostics)
        if sol is not None:
            confirmation = {"value": sol.value, "iterations_budget": iters, "converged": sol.converged}
    else:
        if first is not None:
            diagnostics.append("the predicted closed form is not certified by the cheap bounds: factored solve")
        try:
            T.check_budget(inst, starts=starts, hops=hops, factored=True)
            sol = _solve(inst, starts=starts, seed=seed, hops=hops, hop_until=hop_until, backend_opts=backend_opts,
                         time_budget=time_budget)
        except InputError as exc:
            if first is None:
                raise
            diagnostics.append(f"factored solve refused by its budget ({exc})")
    if sol is not None and sol.diagnostics.get("time_budget_reached"):
        diagnostics.append(f"factored solver: stopped by the wall-clock safety limit "
                           f"({sol.diagnostics.get('time_budget'):.3g} s); the work budget was not reached; the best "
                           "point so far is used")
    if sol is not None:
        feasible = {"solver": sol.value, **feasible}
    if certified_first:  # the certificate decided; the confirmation's point is not re-certified (N x N work)
        bounds, face_cert = first
    else:
        upper = min(feasible.values()) if feasible else None
        bounds, face_cert = certify_instance(inst, None if sol is None else sol.variables["H"], face=face,
                                             solver=solver, upper=upper, diagnostics=diagnostics,
                                             reduced=pre if sol is None else None, exact_face=exact_face, tol=tol)
    _radius_cross_check(inst, sol, face_cert, diagnostics)
    H = None if sol is None else sol.variables["H"]
    collapsed = None
    if (H is not None and not inst.nonneg and inst.full_batch and not inst.balanced and inst.k >= 3
            and "collapsed ETF" in feasible):  # no closed-form minimiser: certify around the solver's point
        collapsed = collapsed_evidence(inst, H)
    return SCLResult(face, feasible, bounds, face_cert, sol, certified_first, confirmation,
                     _geometry_evidence(inst, H, face), diagnostics, collapsed)
