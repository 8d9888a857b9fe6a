"""The feature-collapse engine's one entry point (docs/feature_collapse.md, docs/DEVELOPING.md).

:func:`solve_instance` finds the truth about one ``theory.feature_collapse.FCInstance`` in one call and returns
an :class:`FCSolution`: numbers and evidence, never verdicts. It plans the routes (:func:`plan_routes`: the
L-BFGS search and whether cvxpy's convex program joins its certificate, each with why), then runs them on one
BLAS thread (the products are small, K L x n_w x d, and a threaded BLAS spin-waits on them):

- the exact threshold ||grad CE(0)||_2 with its round-off allowance (no LayerNorm: Z = 0 is optimal iff it is
  <= lambda);
- the auxiliary L-BFGS search (``solvers.feature_collapse.solve``, several random starts): its value is a
  feasible value, its certificate (nuclear-kkt without LayerNorm, sdp-dual with it, plus cvxpy's convex program
  on small instances) a proven lower bound; its point decides nothing;
- the predicted configuration (``theory.feature_collapse.claimed_configuration``: type I / II / III or the
  trivial point built from the prediction's constants) when the hypotheses hold: its exact risk (a feasible
  value), the proven lower bound at it, its uniqueness certificate (``dual_certificate``: KKT + strict
  complementarity + injectivity; when valid the configuration is THE minimiser up to rotation, so its
  geometry is the minimiser's) and its geometry measured on it.

The certificate reported is the largest proven lower bound with the least feasible value (and where each
came from). The claims layer (``proofs_check.claims.feature_collapse.check_instance``) asks once and only
states and judges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from solvers import feature_collapse as S
from solvers.common import Certificate, Solution
from theory import feature_collapse as T
from theory.feature_collapse import FCInstance, Prediction
from theory._validate import as_int
from theory._validate import finite as _finite


def plan_routes(inst: FCInstance, *, solve: bool, cvxpy: str | bool, plan: list | None = None) -> dict:
    """Which routes run and why: ``{"lbfgs": bool, "cvxpy": bool}``; ``plan`` receives one line per route.

    The L-BFGS search runs when ``solve``; cvxpy's convex program (the nuclear-norm form without LayerNorm,
    the SDP relaxation as a cross-check with it) joins its certificate when ``cvxpy`` is True / "yes", or
    "auto" and the instance is small (``solvers.feature_collapse.cvxpy_fits``). The predicted configuration's
    certificates always run when the hypotheses hold (``solve_instance``)."""
    plan = [] if plan is None else plan
    small = S.cvxpy_fits(inst)
    use_cvx = cvxpy is True or cvxpy == "yes" or (cvxpy == "auto" and small)
    if solve:
        plan.append("lbfgs: auxiliary search (a feasible value and a proven bound at its point; its point decides "
                    "nothing)")
        if use_cvx:
            plan.append("cvxpy: " + ("asked for" if cvxpy is True or cvxpy == "yes" else
                                     f"auto, K * sentences <= {S.MAX_CVXPY_WORK} and K L + n_w <= "
                                     f"{S.MAX_CVXPY_PSD_DIM}"))
        else:
            plan.append("cvxpy: not run (" + (f"not asked for: cvxpy = {cvxpy!r}" if cvxpy != "auto" else
                                              f"auto: K * sentences > {S.MAX_CVXPY_WORK} or K L + n_w > "
                                              f"{S.MAX_CVXPY_PSD_DIM}") + ")")
    else:
        plan.append("lbfgs: not run (solve = False)")
    return {"lbfgs": bool(solve), "cvxpy": bool(solve and use_cvx)}


@dataclass
class FCSolution:
    """What :func:`solve_instance` found for one instance: numbers and evidence, never verdicts.

    ``prediction``: the theory's (or the given) :class:`Prediction`; ``hypotheses_failed``: the theorem's failed
    hypotheses (then no configuration and no minimiser evidence). ``threshold``: ``zero_gradient`` (spectral
    norm and round-off of grad CE(0); no LayerNorm) or None. ``plan``: one line per route, run or not and why;
    ``routes``: the report's routes ("lbfgs": the search with its certificate, "closed-form": the configuration's
    value, certificate and uniqueness certificate). ``lbfgs``: the search's Solution; ``lbfgs_value`` its value
    when finite. ``configuration``: (W, U, E) of the predicted configuration or None (``why_no_configuration``);
    ``configuration_value``: its exact risk; ``configuration_certificate``: the proven bound at it;
    ``uniqueness``: its uniqueness certificate (``unique``, ``why``, residuals); ``exact_phase``: no LayerNorm,
    where the float evidence leaves the phase open (the predicted zero configuration without a strictly
    complementary certificate, or lambda within round-off of ||grad CE(0)||_2), ||grad CE(0)||_2 <= lambda decided
    in exact rationals (``solvers.feature_collapse.exact_zero_phase``), else None. ``lower_bounds`` /
    ``feasible``: (value, where from) of every bound and feasible value; ``certificate``: the best of each
    (``lower_bound``, ``upper``, ``gap``, ``method``, ``upper_from``; the report's certificate); without the
    hypotheses the search's certificate as it is, or None. ``configuration_geometry``: the geometry measured on
    the configuration (``measured_at_claimed_configuration``, its largest entries); ``lbfgs_distance``: the
    search's Z to the configuration's (absolute and relative). ``geometry``: the report's geometry (at the
    configuration when certified unique, else at the search's point, said in ``source``); ``diagnostics``:
    the search's trouble and a missing configuration."""

    inst: FCInstance
    prediction: Prediction
    hypotheses_failed: list = field(default_factory=list)
    threshold: dict | None = None
    plan: list = field(default_factory=list)
    routes: dict = field(default_factory=dict)
    lbfgs: Solution | None = None
    lbfgs_value: float | None = None
    configuration: tuple | None = None
    why_no_configuration: str = ""
    configuration_value: float | None = None
    configuration_certificate: Certificate | None = None
    uniqueness: dict | None = None
    exact_phase: dict | None = None
    lower_bounds: list = field(default_factory=list)
    feasible: list = field(default_factory=list)
    certificate: dict | None = None
    configuration_geometry: dict = field(default_factory=dict)
    lbfgs_distance: dict = field(default_factory=dict)
    geometry: dict = field(default_factory=dict)
    diagnostics: list = field(default_factory=list)

    @property
    def lower_bound(self) -> float | None:
        return (self.certificate or {}).get("lower_bound")

    @property
    def attained(self) -> float | None:
        """The least feasible value (configuration or search), or None."""
        return (self.certificate or {}).get("upper")

    @property
    def certified_unique(self) -> bool:
        """True when the predicted configuration carries a valid uniqueness certificate, or is W = U = 0 with the
        zero phase proven in exact rationals (:attr:`exact_zero`)."""
        return bool((self.uniqueness or {}).get("unique")) or self.exact_zero

    @property
    def exact_zero(self) -> bool:
        """The predicted configuration is W = U = 0 and ||grad CE(0)||_2 <= lambda holds in exact rationals: it is
        the unique minimiser (``solvers.feature_collapse.HOW_EXACT_ZERO``), also at the threshold itself."""
        ex, cfg = self.exact_phase, self.configuration
        return bool(ex and ex.get("decided") and ex["zero_minimiser"] and self.prediction.geometry == "trivial"
                    and cfg is not None and not any(np.any(a) for a in cfg))

    @property
    def point(self) -> tuple | None:
        """(W, U, E): the predicted configuration when it is certified unique (the minimiser up to rotation),
        else the search's best point; None when neither exists."""
        if self.configuration is not None and self.certified_unique:
            return self.configuration
        if self.lbfgs is not None and self.lbfgs.variables:
            v = self.lbfgs.variables
            return v["W"], v["U"], v["E"]
        return None

    def solution_report(self) -> dict | None:
        """The report's solution: the search's Solution (start values dropped) and its gap to the prediction."""
        sol = self.lbfgs
        if sol is None:
            return None
        out = sol.to_dict()
        out.pop("start_values", None)
        obj = self.prediction.objective
        out["objective_gap"] = (sol.value - obj) if _finite(sol.value, obj) else None
        return out


def solve_instance(inst: FCInstance, *, predict: Callable[[FCInstance], Prediction] | None = None,
                   n_starts: int = 4, seed: int = 0, cvxpy: str | bool = "auto", solve: bool = True) -> FCSolution:
    """Solve and certify one feature-collapse instance: the budget check (InstanceError, an InputError, for an
    instance or a number of starts beyond it), the prediction (``predict``, default the theory's), the routes
    (:func:`plan_routes`), the best certificate, the predicted configuration's value, certificate, uniqueness
    certificate and geometry, and the report's geometry. Everything runs on one BLAS thread."""
    import scipy.optimize  # noqa: F401 - its BLAS loaded before the limit below is set
    from threadpoolctl import threadpool_limits

    # single-threaded BLAS (numpy's and scipy's, as loaded now): the products are small (U E^T is
    # K L x n_w x d) and a threaded BLAS spin-waits on them (the type-I claim took 0.87 CPU s with 2 threads,
    # 0.07 s with 1); ``ncproofs run`` runs every claim so
    with threadpool_limits(limits=1, user_api="blas"):
        return _solve_instance(inst, predict, n_starts, seed, cvxpy, solve)


def _solve_instance(inst: FCInstance, predict, n_starts: int, seed: int, cvxpy, solve: bool) -> FCSolution:
    n_starts = as_int("n_starts", n_starts, minimum=0)  # int(inf) was an OverflowError, int(nan) a ValueError
    S.check_budget(inst, max(1, n_starts) if solve else 1)
    pred = (predict or T.predict)(inst)
    s = FCSolution(inst=inst, prediction=pred, hypotheses_failed=T.hypotheses(inst))
    prob = S.FCProblem(inst)
    if not inst.layernorm:
        s.threshold = S.zero_gradient(inst)
    run = plan_routes(inst, solve=solve, cvxpy=cvxpy, plan=s.plan)
    if run["lbfgs"]:
        _search(s, n_starts, seed, run["cvxpy"])
    if s.hypotheses_failed:
        sol = s.lbfgs
        s.certificate = sol.certificate.to_dict() if sol is not None and sol.certificate is not None else None
        s.geometry = _report_geometry(s, None)
        return s
    _configuration(s, prob)
    _exact_phase(s)
    sol = s.lbfgs
    if sol is not None and sol.certificate is not None:
        s.lower_bounds.append((sol.certificate.lower_bound, sol.certificate.method + " at the L-BFGS point"))
    if s.lbfgs_value is not None:
        s.feasible.append((s.lbfgs_value, "L-BFGS point"))
    lb, lb_how = max(s.lower_bounds, key=lambda x: x[0]) if s.lower_bounds else (None, "")
    up, up_how = min(s.feasible, key=lambda x: x[0]) if s.feasible else (None, "")
    s.certificate = {"lower_bound": lb, "upper": up, "gap": (up - lb) if _finite(lb, up) else None,
                     "method": lb_how, "upper_from": up_how}
    if sol is not None and s.configuration is not None and sol.variables:
        cfg = s.configuration
        Zp = cfg[1] @ cfg[2].T
        nz = float(np.linalg.norm(Zp))
        dist = float(np.linalg.norm(sol.variables["Z"] - Zp))
        s.lbfgs_distance = {"lbfgs_Z_distance": dist, "lbfgs_Z_rel_distance": dist / nz if nz > 0 else None}
    s.geometry = _report_geometry(s, s.configuration if s.certified_unique else None)
    return s


def _search(s: FCSolution, n_starts: int, seed: int, use_cvx: bool) -> None:
    """The auxiliary L-BFGS route (with cvxpy in its certificate when ``use_cvx``): its report and its trouble."""
    sol = S.solve(s.inst, n_starts=n_starts, seed=seed, cvxpy=use_cvx)
    s.lbfgs = sol
    s.routes["lbfgs"] = sol.to_dict()
    if sol.certificate is not None:
        s.routes["lbfgs"]["certificate"] = sol.certificate.to_dict()
        for w in (sol.certificate.details.get("cvxpy_warnings") or []):
            s.diagnostics.append(f"cvxpy: {w}")
    if sol.diagnostics.get("budget_reached"):
        s.diagnostics.append(f"L-BFGS: {sol.diagnostics['message']}")  # the work budget, or the wall-clock safety net
    if sol.diagnostics.get("failed_starts"):
        s.diagnostics.append(f"{sol.diagnostics['failed_starts']} L-BFGS start(s) reached an embedding proportional "
                             "to 1 (LayerNorm undefined) and were dropped")
    if not sol.converged and _finite(sol.value):
        s.diagnostics.append(f"L-BFGS did not reach gradient norm {S.CONVERGED_GRAD:g} "
                             f"(got {sol.diagnostics.get('grad_norm')})")
    s.lbfgs_value = sol.value if _finite(sol.value) else None


def _configuration(s: FCSolution, prob: S.FCProblem) -> None:
    """The predicted configuration: its exact risk, the proven bound and the uniqueness certificate at it, and
    its geometry (measured on it)."""
    inst, pred = s.inst, s.prediction
    cfg, why = T.claimed_configuration(inst, pred)
    s.configuration, s.why_no_configuration = cfg, why
    if cfg is None:
        s.diagnostics.append(f"no claimed configuration: {why}")
        return
    W, U, E = cfg
    s.configuration_value = prob.objective(W, U, grad=False)
    c_cfg = S.certificate_at(prob, E, U, s.configuration_value)
    s.configuration_certificate = c_cfg
    s.routes["closed-form"] = {"value": s.configuration_value, "certificate": c_cfg.to_dict()}
    s.lower_bounds.append((c_cfg.lower_bound, c_cfg.method + " at the claimed configuration"))
    s.feasible.append((s.configuration_value, "claimed configuration"))
    s.uniqueness = S.dual_certificate(prob, E, U)
    s.routes["closed-form"]["uniqueness_certificate"] = s.uniqueness
    s.configuration_geometry = {"measured_at_claimed_configuration": S.measure(inst, W, U, b_pred=pred.b),
                                "max_abs_U": float(np.abs(U).max(initial=0.0)),
                                "max_abs_W": float(np.abs(W).max(initial=0.0))}


def _exact_phase(s: FCSolution) -> None:
    """No LayerNorm, where float64 leaves the phase open: the predicted zero configuration without a strictly
    complementary certificate (at and just above the threshold the dual slack's eigenvalue is 0 up to round-off),
    or lambda within the round-off of ||grad CE(0)||_2: ||grad CE(0)||_2 <= lambda decided in exact rationals (in
    place: ``exact_phase``, a diagnostic)."""
    zg = s.threshold
    if zg is None:
        return
    trivial_open = (s.prediction.geometry == "trivial" and s.configuration is not None
                    and not (s.uniqueness or {}).get("unique"))
    band = _finite(zg["spectral_norm"], zg["roundoff"]) and abs(zg["spectral_norm"] - s.inst.lam) <= zg["roundoff"]
    if not (trivial_open or band):
        return
    ex = S.exact_zero_phase(s.inst, zg["gradient"])
    s.exact_phase = ex
    if not ex["decided"]:
        s.diagnostics.append(f"exact phase not decided: {ex['why']}")
    elif ex["zero_minimiser"]:
        s.diagnostics.append("exact phase: ||grad CE(0)||_2 " + ("= lambda exactly" if ex["at_threshold"] else
                             "< lambda") + " in rationals: W = U = 0 is the unique minimiser")
    else:
        s.diagnostics.append("exact phase: ||grad CE(0)||_2 > lambda in rationals: W = U = 0 is not a minimiser "
                             "(the minimiser is a nonzero configuration of vanishing scale)")


def _report_geometry(s: FCSolution, certified_cfg) -> dict:
    """The report's geometry: at the certified configuration, else at the search's point (never decides)."""
    from theory.geometry import classify_gram

    inst, sol = s.inst, s.lbfgs
    if certified_cfg is not None:
        W, U, E = certified_cfg
        source = "the certified unique minimiser (claimed configuration)"
    elif sol is not None and sol.variables:
        W, U, E = sol.variables["W"], sol.variables["U"], sol.variables["E"]
        source = "the L-BFGS point (not certified as the minimiser)"
    else:
        return {}
    meas = S.measure(inst, W, U, b_pred=s.prediction.b)
    Em = E.reshape(inst.n_c, inst.s_c, inst.d).mean(axis=1)
    geo = classify_gram(Em @ Em.T)
    metrics = {k: meas.get(k) for k in ("within_concept_deviation", "within_concept_spread", "rank_W",
                                        "u_norms", "concept_cosine_offdiag", "word_norms")}
    return {"classification": geo.classification, "class_mean_cosines": meas.get("concept_cosines"),
            "metrics": metrics, "source": source, "what": "concept-mean features (cosines between concepts)"}
