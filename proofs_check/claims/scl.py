"""Claims for the supervised contrastive loss (docs/scl.md).

Kini et al. (ICLR 2024) and Graf et al. (ICML 2021) statements are *reconstructed* (spec says so):
the papers' exact normalisation may differ. Statements found here (the one-class-batch
refinement of C1, the dimension count for d < k) are *derived*.

Every claim is built by a factory that takes the prediction as a parameter, so tests can feed a
false statement (a bound raised by 1e-3, the wrong geometry, the spec's literal C1) and see it
REFUTED.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, SolveReport, Verdict, close, condition, exceeds,
                               fmt, geometry_is, hypothesis_fails, is_finite, lower_bound_claim, optimum_matches,
                               point_statement, symbolic_true, symbolic_zero, tolerance, within)
from solvers import scl as S
from solvers import scl_engine as E
# the engine's names that callers import from here (proofs_check/families/scl.py, claims/scl_thread.py)
from solvers.scl_engine import SOLVER_TIME_BUDGET_S, certify_instance, loss_roundoff  # noqa: F401
from theory import scl as T
from theory._validate import InputError
from theory.geometry import GEOMETRY_TOL, class_means, classify_gram, cosine_matrix

FAMILY = "scl"
KINI = "Kini et al., ICLR 2024 (arXiv 2306.07960); docs/scl.md"
GRAF = "Graf et al., ICML 2021; docs/scl.md"

#: Value tolerance: relative part 1e-9 (the proven bounds land within ~1e-11 relative of the optimum
#: on every instance measured beyond their stated allowance, the factored solver within ~1e-12 after its
#: stop tests; 1e-9 is 1000x below the 1e-6 perturbations the false-claim tests must detect: with the
#: earlier 1e-6 a bound off by exactly 1e-6 relative was VERIFIED), plus the round-off of evaluating the
#: loss at a feasible point (LOSS_ROUNDOFF_ULPS ulps per anchor term, each a log-sum-exp of logits up to
#: 1/tau: a (3,3,3) ETF at tau = 1e-4 evaluates 5.7e-12 below its exact value), plus the stated
#: round-off allowance of the proven bound in use (shown in the evidence). No absolute floor beyond the
#: round-off: the earlier 1e-8 accepted a 1% error of the (2,2,2), tau = 0.05 optimum 4.9e-8.
VALUE_RTOL = 1e-9
# (LOSS_ROUNDOFF_ULPS, loss_roundoff, the hop stop and the solver's work budgets live in solvers/scl_engine.py.)

#: Within-class collapse: every minimiser has max ||h_i - mu_{y_i}|| <= this (proven radius).
COLLAPSE_TOL = 1e-4
#: "The OF (ETF) is the unique minimiser": every minimiser's Gram within this Frobenius distance of it
#: (proven radius; the measured radii are ~1e-4 where strict complementarity holds).
UNIQUE_GRAM_TOL = 1e-2
#: A second minimiser witness must differ from the OF Gram by at least this (max entry).
NONUNIQUE_MIN = 0.1
#: A witness construction "attains" a proven optimum when its loss is within this relative
#: distance of the proven lower bound: the constructions are exact (their loss equals the bound in
#: exact arithmetic), so only rounding separates them (measured <= 1e-14 relative).
WITNESS_RTOL = 1e-9

#: Rounding of a closed-form reference value (a few float64 operations): a proven lower bound must
#: exceed the reference by more than this to refute "the optimum is below the reference".
REFERENCE_RTOL = 1e-12

#: Spec reference values (docs/scl.md table, 6 decimals).
SPEC_REFERENCES = {((5, 3, 2), 0.5): (12.422968, 10.465194),
                   ((4, 4, 4), 0.5): (16.881050, 14.679291),
                   ((3, 2), 1.0): (4.506563, 3.141731)}
#: Six printed decimals: half a unit in the last place.
SPEC_ATOL = 5e-7


def _tol(value: float, allowance: float = 0.0, inst: T.SCLInstance | None = None) -> float:
    """VALUE_RTOL |value| + the loss round-off of ``inst`` + the proven bound's allowance."""
    atol = loss_roundoff(inst) if inst is not None else 0.0
    return tolerance(value, rtol=VALUE_RTOL, atol=atol) + max(0.0, float(allowance or 0.0))


def _starts(ctx: RunContext) -> int:
    return 6 if ctx.full else 3


def _inst_label(counts, tau, d=None, batches=None) -> str:
    s = f"n={tuple(counts)}, tau={tau}"
    if d is not None:
        s += f", d={d}"
    if batches is not None:
        s += f", {len(batches)} batches"
    return s


def _mean_gram(H, y):
    M = class_means(H, y)
    return M.T @ M


def _class_gram_of(G: np.ndarray, counts) -> np.ndarray:
    """Gram of the class means of the configuration with sample Gram G (block means)."""
    y = T.labels_from_counts(counts)
    n = np.asarray(counts, dtype=float)
    U = (y[:, None] == np.arange(len(counts))[None, :]) / n[None, :]
    return U.T @ G @ U


def _geometry_statement(name: str, cls, claimed: str, r: float, lip: float, how: str, ev: dict) -> Check:
    """The class-mean geometry of every minimiser, from the classification at the center and the proven
    class-mean Gram radius r (normalised distances are lip-Lipschitz in the class-mean Gram)."""
    if claimed in ("simplex-etf", "orthogonal-frame"):
        dev = cls.distance_etf if claimed == "simplex-etf" else cls.distance_of
        return point_statement(name, dev, GEOMETRY_TOL, radius=r, lipschitz=lip, how=how,
                               what=f"normalised distance to the {claimed} template", evidence=ev)
    # "other": neither template within the tolerance at any minimiser
    ev = {**ev, "radius": r, "lipschitz": lip, "tolerance": GEOMETRY_TOL, "radius_proof": how,
          "distance_etf": cls.distance_etf, "distance_of": cls.distance_of}
    dists = {"simplex-etf": cls.distance_etf, "orthogonal-frame": cls.distance_of}
    holds = [g for g, dv in dists.items() if is_finite(dv) and within(dv + lip * r, GEOMETRY_TOL)]
    far = all(is_finite(dv) and exceeds(dv - lip * r, GEOMETRY_TOL) for dv in dists.values())
    if holds:
        return Check(name, Verdict.REFUTED, f"every minimiser is a {holds[0]} (distance "
                     f"{fmt(dists[holds[0]], 3)} + proven radius term {fmt(lip * r, 3)} <= {GEOMETRY_TOL})", ev)
    if far:
        return Check(name, Verdict.VERIFIED, f"every minimiser is neither an ETF (distance {fmt(cls.distance_etf, 3)}) "
                     f"nor an OF (distance {fmt(cls.distance_of, 3)}): proven radius term {fmt(lip * r, 3)} ({how})", ev)
    return Check(name, Verdict.INCONCLUSIVE, "the proven radius does not decide the geometry", ev)


def _no_cert(name: str, why: str, ev: dict | None = None) -> Check:
    return Check(name, Verdict.INCONCLUSIVE, f"no geometry certificate: {why}", dict(ev or {}))


def geometry_checks(inst: T.SCLInstance, face_cert, *, claimed_geometry: str, prefix: str = "") -> list[Check]:
    """Statements about every minimiser, from the geometry certificate at the predicted collapsed
    configuration G0: its class-mean geometry, within-class collapse and uniqueness. Each is a
    point statement at G0 with the proven radius (every minimiser lies within it): VERIFIED when the
    statement holds with room for the radius, REFUTED when it fails everywhere within the radius,
    INCONCLUSIVE without a certificate (never decided from a value gap). Balanced UFM also tries the
    closed-form dual point at the ETF (exact: radius 0 for the minimisers at every tau; docs/scl.md)."""
    face_cert = E.better_etf_certificate(inst, face_cert)
    face = face_cert.face if face_cert is not None else None
    b = face_cert.bounds(0.0) if face is not None else None
    names = [prefix + "geometry-" + claimed_geometry.replace("simplex-", ""), prefix + "within-class-collapse",
             prefix + "unique-minimiser"]
    if b is None:
        why = face_cert.face_reason if face_cert is not None and face_cert.face_reason else \
            "no certificate at the predicted configuration"
        return [_no_cert(n, why) for n in names]
    exact = bool(face_cert.details.get("exact_dual"))
    if exact and face == "orthogonal-frame":  # closed-form dual at the collapsed OF: class level, exact
        M0 = np.eye(inst.k)
        dev_c = 0.0
        how = ("closed-form dual point at the collapsed orthogonal frame (exact complementarity, S's spectrum analytic, "
               "positive between-class multipliers; every minimiser equals the OF Gram: E = 0, docs/scl.md)")
    elif exact:  # class-level center (no N x N matrix needed)
        H0 = T.etf_features(inst.counts, max(inst.k - 1, 1))
        M0 = S.class_mean_gram(H0, inst.labels)
        dev_c = 0.0  # G0 = U A0 U^T: every sample equals its class mean exactly
        sig = f"sigma = N p_neg / tau = e^{fmt(face_cert.details['log_sigma'], 4)} (> 0 analytically)"
        how = (f"closed-form dual point at the collapsed {face} (exact complementarity, S's spectrum analytic, "
               f"{sig}; E = 0 for every minimiser, docs/scl.md)")
    else:
        G0 = E.center_gram(inst, face)
        M0 = _class_gram_of(G0, inst.counts)
        y = inst.labels
        U = (y[:, None] == np.arange(inst.k)[None, :]) / np.asarray(inst.counts, float)[None, :]
        D = np.eye(inst.N) - U[:, y].T  # rows e_i - u_{y_i}
        dev_c = float(np.sqrt(max(0.0, float(np.max(np.einsum("ij,jk,ik->i", D, G0, D))))))
        how = (f"strictly complementary dual certificate at the collapsed {face} Gram, sigma = {fmt(face_cert.sigma, 3)}, "
               f"growth bound of docs/scl.md")
    cls = classify_gram(M0)
    if b.get("growth_mu") is not None:  # k >= 4 ETF: the loss's growth along the face (docs/scl.md)
        how += f" with growth constant mu = {fmt(b['growth_mu'], 3)} on the ETF face"
    # normalised-Gram distances are 2/||M0||_F-Lipschitz in the class-mean Gram (||a/|a| - b/|b||| <= 2|a-b|/|b|)
    lip = 2.0 / float(np.linalg.norm(M0))
    ev = {"certificate": face_cert.to_dict(), "center_classification": cls.to_dict(),
          "geometry_tolerance": GEOMETRY_TOL}
    out = [_geometry_statement(names[0], cls, claimed_geometry, b["class_gram_radius"], lip, how, ev)]
    out.append(point_statement(names[1], dev_c, COLLAPSE_TOL, radius=b["collapse"], lipschitz=1.0, how=how,
                               what="max ||h_i - mu_{y_i}||", evidence={"collapse_bound": b["collapse"], "t": b["t"]}))
    out.append(point_statement(names[2], 0.0, UNIQUE_GRAM_TOL, radius=b["gram_radius"], lipschitz=1.0, how=how,
                               what=f"Frobenius distance of every minimiser's Gram to the {face} Gram",
                               evidence={"gram_radius": b["gram_radius"]}))
    return out


#: Names of the imbalanced-UFM minimiser statements (ids in `solve scl`, prefixes in the claim factory).
IMBALANCED_GEOMETRY_IDS = {"other": "geometry-not-etf", "simplex-etf": "geometry-etf",
                           "orthogonal-frame": "geometry-orthogonal-frame"}


def imbalanced_geometry_checks(inst: T.SCLInstance, H: np.ndarray, *, claimed_geometry: str = "other",
                               minority_closer: bool = True, prefix: str = "", names: dict | None = None,
                               evidence: dict | None = None) -> list[Check]:
    """Full-batch UFM without a closed-form minimiser (imbalanced counts): the solver's point is polished
    into a collapsed candidate G0 = U A0 U^T and certified by the dense Gram dual point with the face of
    G0 (solvers.scl.collapsed_certificate); the growth of the loss around G0 turns the certified gap into a
    proven radius (docs/scl.md, "Imbalanced UFM"). Three point statements at G0: within-class collapse,
    the class-mean geometry (``claimed_geometry``: "other" = neither ETF nor OF) and "the two smallest
    classes' means are closer (larger cosine) than the two largest classes'" (or, ``minority_closer=False``,
    the opposite). ``evidence``: the engine's :func:`solvers.scl_engine.collapsed_evidence` at ``H`` when already
    computed (``SCLResult.collapsed``), else it is computed here."""
    names = names or {}
    n_geo = names.get("geometry", prefix + IMBALANCED_GEOMETRY_IDS.get(claimed_geometry, "geometry-" + claimed_geometry))
    n_col = names.get("collapse", prefix + "within-class-collapse")
    n_min = names.get("minority", prefix + ("minority-classes-closer" if minority_closer else "majority-classes-closer"))
    y = inst.labels
    counts = inst.counts
    order = np.argsort(counts, kind="stable")
    small, large = order[:2], order[-2:]
    evidence = evidence if evidence is not None else E.collapsed_evidence(inst, H)
    A_sol = evidence["A_sol"]
    cos_s = np.array(cosine_matrix(class_means(H, y)), dtype=float)
    ev0 = {"solver_point_classification": classify_gram(A_sol).classification,
           "cos_minority_at_solver_point": float(cos_s[small[0], small[1]]),
           "cos_majority_at_solver_point": float(cos_s[large[0], large[1]]),
           "minority_pair": [int(c) for c in small], "majority_pair": [int(c) for c in large]}
    all_names = [n_col, n_geo, n_min]
    cert = evidence["cert"]
    if cert is None:
        return [_no_cert(nm, evidence["why"], ev0) for nm in all_names]
    b = cert.bounds(0.0) if cert.face is not None else None
    if b is None:
        why = cert.face_reason or "no positive curvature bound around the candidate"
        return [_no_cert(nm, why, {**ev0, "certificate": cert.to_dict()}) for nm in all_names]
    A0 = np.asarray(cert.details["A0"], dtype=float)
    G0 = A0[np.ix_(y, y)]
    U = (y[:, None] == np.arange(inst.k)[None, :]) / np.asarray(counts, float)[None, :]
    D = np.eye(inst.N) - U[:, y].T
    dev_c = float(np.sqrt(max(0.0, float(np.max(np.einsum("ij,jk,ik->i", D, G0, D))))))
    how = (f"dense Gram dual at the polished collapsed candidate (rank {cert.details['rank']}), sigma = "
           f"{fmt(cert.sigma, 3)}, certified gap E = {fmt(b['excess'], 3)}, curvature {fmt(b['growth_curvature'], 3)} "
           "of the class-reduced loss around it (docs/scl.md, Imbalanced UFM)")
    ev = {**ev0, "certificate": cert.to_dict(), "center_class_gram": A0.tolist()}
    cls = classify_gram(A0)
    lip = 2.0 / float(np.linalg.norm(A0))
    cos0 = A0 / np.sqrt(np.outer(np.diag(A0), np.diag(A0)))
    diff0 = float(cos0[small[0], small[1]] - cos0[large[0], large[1]])  # > 0: minority pair closer
    out = [point_statement(n_col, dev_c, COLLAPSE_TOL, radius=b["collapse"], lipschitz=1.0, how=how,
                           what="max ||h_i - mu_{y_i}||", evidence={**ev0, "collapse_bound": b["collapse"], "t": b["t"]}),
           _geometry_statement(n_geo, cls, claimed_geometry, b["class_gram_radius"], lip, how,
                               {**ev, "center_classification": cls.to_dict()})]
    # violation measure: <= 0 when the statement holds; each cosine moves by at most cosine_radius
    dev_m = -diff0 if minority_closer else diff0
    out.append(point_statement(n_min, dev_m, 0.0, radius=b["cosine_radius"], lipschitz=2.0, how=how,
                               what=("cos(majority pair) - cos(minority pair)" if minority_closer
                                     else "cos(minority pair) - cos(majority pair)"),
                               evidence={**ev0, "cos_minority_at_center": float(cos0[small[0], small[1]]),
                                         "cos_majority_at_center": float(cos0[large[0], large[1]]),
                                         "cosine_radius": b["cosine_radius"]}))
    return out


def _certified_value_check(name: str, value: float, bounds: E.BoundRoutes, inst: T.SCLInstance) -> Check:
    """The reported optimum (a feasible value) is the global optimum within the tolerance
    (``core.certified_optimum``)."""
    from proofs_check.core import certified_optimum

    return certified_optimum(name, value, proven_lower=bounds.value, tol=_tol(value, bounds.allowance, inst),
                             note=bounds.route or "", evidence={"route": bounds.route})


def _below_check(name: str, reference: float, feasible: float, bounds: E.BoundRoutes, what: str,
                 inst: T.SCLInstance) -> Check:
    """The statement "min < reference" (strictly, by more than the tolerance; ``core.min_below``): VERIFIED
    by a feasible point below reference - tol; REFUTED by a proven lower bound >= reference (both ends widened
    by REFERENCE_RTOL relative)."""
    from proofs_check.core import min_below

    return min_below(name, reference, feasible_value=feasible, proven_lower=bounds.value,
                     tol=_tol(reference, bounds.allowance, inst), allowance=REFERENCE_RTOL * max(1.0, abs(reference)),
                     what=what)


# --------------------------------------------------------------------------------------
# check_instance: the one verdict engine of `ncproofs solve scl`
# --------------------------------------------------------------------------------------

def _prediction(inst: T.SCLInstance, predicted_value, predicted_geometry):
    """(theorem, predicted value, claimed geometry) for the instance: Kini et al. Theorems 1/2 for UFM+, Graf et al.
    for balanced full-batch UFM (n >= 2); ``predicted_*`` override them (the factories feed false statements)."""
    if inst.nonneg:
        theorem = "Kini et al. " + ("Theorem 1" if inst.full_batch else "Theorem 2") + " (reconstructed)"
        pred = (float(T.theorem2_bound(inst.counts, inst.batches, inst.tau)) if predicted_value is None
                else float(predicted_value))
        return theorem, pred, predicted_geometry or "orthogonal-frame"
    if inst.full_batch and inst.balanced and inst.counts[0] >= 2:
        pred = T.etf_value(inst.counts, inst.tau) if predicted_value is None else float(predicted_value)
        return "Graf et al. balanced ETF value (reconstructed)", pred, predicted_geometry or "simplex-etf"
    return None, None, None


def _confirmation_check(name: str, res: E.SCLResult, inst: T.SCLInstance) -> Check:
    """The bounded confirmation solve against the certified optimum: a feasible value below the proven lower bound
    by more than the tolerance is a certificate defect (REFUTED); a value at or above it (within the tolerance) is an
    independent value consistent with it (VERIFIED); a value or bound that is not a finite number decides nothing
    (INCONCLUSIVE: fail closed)."""
    conf, bounds = res.confirmation, res.bounds
    # below the closed forms' dimension the bound is proven but not attained: the solve is compared with the bound
    ref = ("the certified optimum" if getattr(res, "certified_first", True) else
           "the proven lower bound (not attained at this d)")
    value = conf["value"]
    tolc = _tol(value, bounds.allowance, inst)
    gapc = value - bounds.value if is_finite(value, bounds.value) else None
    evc = {"confirmation_value": value, "proven_lower_bound": bounds.value, "tolerance": tolc,
           "iterations_budget": conf["iterations_budget"], "converged": conf["converged"],
           "excess_over_certified_optimum": gapc, "compared_with": ref}
    if gapc is not None and exceeds(-gapc, tolc):
        return Check(name, Verdict.REFUTED, f"the factored solve found {fmt(value)} below the proven lower bound "
                     f"{fmt(bounds.value)}: a certificate defect", evc)
    if gapc is not None and within(-gapc, tolc):
        # a solve stopped by its budget is a feasible value, not a second optimum: the reason says so
        unfinished = "" if conf["converged"] else (f"; not converged (KKT residual above tolerance, at most "
                                                   f"{conf['iterations_budget']} iterations): a feasible value above "
                                                   "the optimum, not a second determination of it")
        return Check(name, Verdict.VERIFIED, f"an independent factored solve (random start, bounded work) found "
                     f"{fmt(value)}, {fmt(gapc, 3)} above {ref} (never below it){unfinished}", evc)
    return Check(name, Verdict.INCONCLUSIVE, f"the confirmation value {fmt(value)} or the proven bound "
                 f"{fmt(bounds.value)} is not a finite number", evc)


def _of_geometry_checks(inst, res, geometry, analysis, prefix) -> list[Check]:
    """UFM+: the minimiser is the collapsed OF, unless a hypothesis fails (d < k, two singleton classes, a batching
    whose minimiser is not unique: then NOT_APPLICABLE with the reason and, where one exists, a second minimiser)."""
    k, d = inst.k, inst.d
    if d < k:
        return [hypothesis_fails(prefix + "geometry-of", f"d = {d} < k = {k}: no orthogonal frame exists")]
    if inst.full_batch and sum(1 for n in inst.counts if n == 1) >= 2:
        singles = [c for c, n in enumerate(inst.counts) if n == 1]
        return [hypothesis_fails(prefix + "geometry-of", f"classes {singles[:2]} are singletons and never constrained "
                                 "against each other: the minimiser is not unique (they may share a direction)")]
    if analysis is not None and analysis.of_unique is not True:
        ev = {"analysis": analysis.to_dict()}
        H2 = T.alternative_minimiser(inst.counts, inst.batches, max(d, k + 1))
        txt = ("non-unique minimiser: " if analysis.of_unique is False else "") + analysis.reason
        if H2 is not None:
            ev["second_minimiser_value"] = S.scl_loss(H2, inst.labels, inst.batches, inst.tau, grad=False)
            ev["second_minimiser_gram_diff"] = float(np.max(np.abs(H2.T @ H2 - T.of_gram(inst.counts))))
            txt += (f"; second minimiser{f' ({analysis.witness})' if analysis.witness else ''} has loss "
                    f"{fmt(ev['second_minimiser_value'])} and a Gram {fmt(ev['second_minimiser_gram_diff'], 3)} from "
                    "the OF's")
        return [hypothesis_fails(prefix + "geometry-of", "C1 and C2 (unique minimiser): " + txt, ev)]
    return geometry_checks(inst, res.face_cert, claimed_geometry=geometry, prefix=prefix)


def _bound_checks(inst, res, pred, geometry, analysis, prefix) -> list[Check]:
    """A predicted value (Theorem 1/2 bound for UFM+, the ETF value for balanced UFM): the lower bound, the optimal
    value where the dimension allows it, and the geometry of every minimiser."""
    bounds, upper, k, d = res.bounds, res.upper, inst.k, inst.d
    tol = _tol(pred, bounds.allowance, inst)
    ev = {"feasible_values": res.feasible}
    how = bounds.route or ""
    name_lb = "theorem-lower-bound" if inst.nonneg else "etf-lower-bound"
    out = [lower_bound_claim(prefix + name_lb, pred, proven_lower=bounds.value, feasible_value=upper, tol=tol,
                             certificate=how, evidence=ev)]
    need = (T.required_dim_for_bound(inst.counts) if inst.full_batch else k) if inst.nonneg else k - 1
    if d >= need:
        out.append(optimum_matches(prefix + "optimal-value", pred, attained=upper, lower_bound=bounds.value, tol=tol,
                                   converged=res.converged, certificate=how, evidence=ev))
    elif inst.nonneg:
        out.append(hypothesis_fails(prefix + "optimal-value", f"d = {d} < {need}: the bound is attained only with "
                                    f"d >= {need} (best value found {fmt(upper)}, bound {fmt(pred)})",
                                    {"found_value": upper, "bound": pred, "required_dim": need}))
    else:
        out.append(hypothesis_fails(prefix + "optimal-value", f"d = {d} < k - 1 = {k - 1}: no simplex ETF exists",
                                    {"found_value": upper, "etf_value": pred}))
    if inst.nonneg:
        out += _of_geometry_checks(inst, res, geometry, analysis, prefix)
    elif d >= need:
        out += geometry_checks(inst, res.face_cert, claimed_geometry=geometry, prefix=prefix)
    return out


def _no_prediction_checks(inst, res, predicted_geometry, prefix):
    """UFM without a closed-form optimum: the certified optimum, and where Kini et al. state it, "below the ETF
    value" with the minimiser's geometry (imbalanced full batch) or "the ETF is not the minimiser" (mini-batch).
    Returns (theorem, claimed geometry, checks)."""
    theorem, geometry = None, None
    k, bounds, sol = inst.k, res.bounds, res.sol
    out = [_certified_value_check(prefix + "certified-optimum", res.upper, bounds, inst)]
    etf_conf = res.feasible.get("collapsed ETF")
    if inst.full_batch and not inst.balanced and k >= 3 and etf_conf is not None:
        theorem = "Kini et al., imbalanced UFM: not an ETF, optimum below the ETF value (reconstructed)"
        out.append(_below_check(prefix + "optimum-below-etf-value", T.etf_value(inst.counts, inst.tau), sol.value,
                                bounds, "the collapsed-ETF value", inst))
        geometry = predicted_geometry or "other"
        out += imbalanced_geometry_checks(inst, res.H, claimed_geometry=geometry, prefix=prefix, evidence=res.collapsed)
    elif not inst.full_batch and etf_conf is not None:
        theorem = "Kini et al., mini-batch UFM: the ETF is not the minimiser in general (reconstructed)"
        out.append(_below_check(prefix + "etf-not-minimiser", etf_conf, sol.value, bounds,
                                "the collapsed ETF's value", inst))
    if inst.full_batch and inst.balanced and inst.counts[0] < 2:
        out.append(hypothesis_fails(prefix + "optimal-value", "Graf et al. need n >= 2 samples per class"))
    return theorem, geometry, out


def instance_checks(inst: T.SCLInstance, *, starts: int = 6, seed: int = 0, hops: int = 20, solver: str = "CLARABEL",
                    backend_opts: dict | None = None, predicted_value: float | None = None,
                    predicted_geometry: str | None = None, analysis=None, time_budget: float = SOLVER_TIME_BUDGET_S,
                    prefix: str = "", method: str = "auto") -> dict:
    """State and judge the statements about one instance from what the SCL engine found
    (:func:`solvers.scl_engine.solve_instance`: the point or the certified predicted configuration, the proven
    lower bound and its route, the geometry certificate, the routes tried with why); returns the pieces of a
    SolveReport (checks, predicted, solution, certificate, geometry, diagnostics, ...). ``predicted_value`` /
    ``predicted_geometry`` override the theory's predictions (the claim factories feed false statements through
    them); they never change what the engine runs."""
    if inst.batches is not None and analysis is None:
        analysis = T.analyze_batching(inst.counts, inst.batches, max(inst.d, inst.k))
    theorem, pred, geometry = _prediction(inst, predicted_value, predicted_geometry)
    res = E.solve_instance(inst, starts=starts, seed=seed, hops=hops, solver=solver, backend_opts=backend_opts,
                           time_budget=time_budget, method=method, tol=lambda v, a=0.0: _tol(v, a, inst))
    checks: list[Check] = []
    if res.confirmation is not None:
        checks.append(_confirmation_check(prefix + "confirmation-solve", res, inst))
    if pred is not None:
        checks += _bound_checks(inst, res, pred, geometry, analysis, prefix)
    else:
        theorem, geometry, more = _no_prediction_checks(inst, res, predicted_geometry, prefix)
        checks += more
    predicted = {"value": pred, "theorem": theorem, "geometry": geometry,
                 "theorem1_bound": T.theorem1_bound(inst.counts, inst.tau), "etf_value": T.etf_value(inst.counts, inst.tau)}
    return {"checks": checks, "predicted": predicted, "certificate": res.certificate, "geometry": res.geometry,
            "solution": res.solution, "diagnostics": res.diagnostics, "analysis": analysis, "bounds": res.bounds,
            "face_cert": res.face_cert, "sol": res.sol, "feasible": res.feasible, "result": res}


def check_instance(inst: T.SCLInstance, *, starts: int = 6, seed: int = 0, hops: int = 20, solver: str = "CLARABEL",
                   backend_opts: dict | None = None, predicted_value: float | None = None,
                   predicted_geometry: str | None = None, method: str = "auto") -> SolveReport:
    """Check one SCL instance against the theorem that applies (Theorem 1 / 2 for UFM+, Graf et al.
    for balanced full-batch UFM, the imbalance / mini-batch statements otherwise). The budget is
    checked before any work (theory.scl.check_budget: InputError with the estimate and the limit).

    Returns a :class:`proofs_check.core.SolveReport` (``to_dict()`` is the ``ncproofs solve --json``
    schema; verdict and reason from ``core.summarise``). Raises ``theory._validate.InputError`` (a
    ValueError) for bad options or an instance above the budget; any other exception is a defect."""
    t0 = time.perf_counter()
    if method not in ("auto", "factored"):
        raise InputError(f"method must be 'auto' or 'factored', got {method!r}")
    # certificate first, or d below the closed forms (a bounded confirmation only; the engine re-checks the search's
    # budget if the class-reduced dual does not close)
    cert_first = method == "auto" and (T.certificate_first_applies(inst) or T.dimension_below_closed_forms(inst))
    est = T.check_budget(inst, starts=starts, hops=hops, factored=not cert_first)
    # the solver gets what the certificates leave of the time limit (at most SOLVER_TIME_BUDGET_S)
    budget = max(10.0, min(SOLVER_TIME_BUDGET_S, T.TIME_LIMIT_S - est["certificate_seconds"] - 15.0))
    parts = instance_checks(inst, starts=starts, seed=seed, hops=hops, solver=solver, backend_opts=backend_opts,
                            predicted_value=predicted_value, predicted_geometry=predicted_geometry, time_budget=budget,
                            method=method)
    extra = {"budget_estimate": est}
    if parts["analysis"] is not None:
        extra["batching"] = parts["analysis"].to_dict()
    return SolveReport(FAMILY, inst.to_dict(), parts["predicted"], parts["solution"], parts["certificate"],
                       parts["geometry"], parts["checks"], routes=parts["certificate"]["routes"],
                       diagnostics=parts["diagnostics"], extra=extra, seconds=round(time.perf_counter() - t0, 3),
                       live=_live(parts))


def _relabel(checks, lab: str):
    for c in checks:
        c.name = f"{c.name} [{lab}]"
        yield c


# --------------------------------------------------------------------------------------
# Theorem 1 (full batch, UFM+)
# --------------------------------------------------------------------------------------

THEOREM1_INSTANCES = [((5, 3, 2), 0.5), ((4, 4, 4), 0.5), ((3, 2), 1.0), ((6, 2, 1), 0.2)]
THEOREM1_FULL = [((2, 2), 2.0), ((5, 1, 4), 0.1), ((3, 3, 2, 2), 0.7), ((6, 5, 4, 3, 2), 1.5)]


def theorem1_symbolic() -> list[Check]:
    df, rel = T.sym_bound_decreasing()
    return [
        symbolic_true("Jensen step: s -> e^{s/tau} is convex", T.sym_jensen_convexity()),
        symbolic_zero("anchor bound rewrite log((n-1)e^{mu/tau}+q) - mu/tau = log(n-1+q e^{-mu/tau})",
                      T.sym_per_anchor_rewrite_zero()),
        symbolic_true("anchor bound decreasing in the mean positive similarity mu", rel,
                      note=f"derivative {df}"),
        symbolic_zero("equality at the OF (positives at 1, negatives at 0)", T.sym_of_anchor_value()),
    ]


def _judged(inst, parts, ctx) -> list[Check]:
    """The instance's checks, with the value statements judged in ball arithmetic under ``run --rigorous``."""
    from proofs_check.rigorous import judge_checks

    return judge_checks(FAMILY, inst.to_dict(), parts["checks"], ctx, live=_live(parts))


def _live(parts) -> dict:
    """The check's float candidate for the ball-arithmetic recipe (``SolveReport.live``: no second solve)."""
    sol = parts.get("sol")
    H = getattr(sol, "variables", {}).get("H") if sol is not None else None
    return {} if H is None else {"H": H}


def _instance_claim_checks(inst, ctx, lab, **kw):
    parts = instance_checks(inst, starts=_starts(ctx), seed=ctx.seed, hops=20, **kw)
    yield from _relabel(_judged(inst, parts, ctx), lab)


def make_theorem1_claim(bound: Callable[[Sequence[int], float], float] = T.theorem1_bound,
                        geometry: str = "orthogonal-frame", instances=None, claim_id: str = "scl.theorem1.full_batch_bound",
                        ) -> Claim:
    """Kini et al. Theorem 1 (full batch, UFM+, d >= k): the loss is >= sum_{n_c >= 2} n_c log(n_c - 1 + (N - n_c)
    e^{-1/tau}), with equality exactly at the collapsed orthogonal frame, for any class sizes.

    Source: Kini et al., ICLR 2024, Theorem 1 (reconstructed). Conditions: every instance is full batch, UFM+,
    d = k. Checked: the proof's symbolic steps (sympy), the spec's reference values, then per instance
    (``instance_checks``) the bound against a proven lower bound, "min = bound" from a feasible point and that
    bound, and the OF geometry, collapse and uniqueness from the geometry certificate (proven radius).
    ``bound`` / ``geometry`` are the statement (a false bound or geometry is REFUTED: a proven bound above it, a
    feasible point below it, or a radius that excludes it); INCONCLUSIVE without a certificate."""
    def check(ctx: RunContext):
        yield from theorem1_symbolic()
        insts = instances or (THEOREM1_INSTANCES + (THEOREM1_FULL if ctx.full else []))
        for counts, tau in insts:
            k = len(counts)
            lab = _inst_label(counts, tau, k)
            pred = float(bound(counts, tau))
            ref = SPEC_REFERENCES.get((tuple(counts), tau))
            if ref is not None:
                yield close(f"spec reference [{lab}]", ref[0], pred, rtol=0, atol=SPEC_ATOL, what="Theorem 1 bound")
            inst = T.SCLInstance(counts, tau, k, True)
            yield from _instance_claim_checks(inst, ctx, lab, predicted_value=pred, predicted_geometry=geometry)

    return Claim(claim_id, FAMILY,
                 "Full batch, UFM+ (unit, nonnegative features), d >= k: L(H) >= sum_{c: n_c >= 2} n_c log(n_c - 1 + "
                 "(N - n_c) e^{-1/tau}), with equality iff H is a collapsed orthogonal frame, for every choice of class "
                 "sizes (imbalance does not break the symmetry).",
                 f"{KINI}, Theorem 1", Provenance.RECONSTRUCTED, check,
                 key=("predicted", "gap"),
                 tags=("ufm+", "bound", "certified"))


# --------------------------------------------------------------------------------------
# d < k: strict gap, except that singleton classes may share a direction
# --------------------------------------------------------------------------------------

LOWDIM_STRICT = [((4, 4, 4), 0.5, 2), ((3, 2), 1.0, 1), ((2, 2, 2, 2), 1.0, 3)]
LOWDIM_SHARED = [((3, 1, 1), 0.5, 2, 2.460226)]  # spec: attained by letting the singletons share
LOWDIM_SHARED_AS_STRICT = [((5, 3, 2), 0.5, 2), ((3, 3, 1, 1), 0.5, 2)]  # full profile: strict gaps


def _lowdim_minimum(counts, tau, d):
    """The exact minimum at dimension d when it is known: d = 1 (UFM+ has one feasible point, all
    features +1), or a construction attaining the rank-free bound (then min = bound). None otherwise."""
    y = T.labels_from_counts(counts)
    if d == 1:
        return S.scl_loss(np.ones((1, sum(counts))), y, None, tau, grad=False), "d = 1: the only feasible point"
    return None, "no lower bound at dimension d < k (the Gram relaxation ignores the rank)"


def _lowdim_lower(counts, tau, d, bound):
    """A proven lower bound at dimension d < k: the bound plus the strict gap of solvers.scl.low_rank_gap (every
    class with n_c >= 2), minus the rounding of the bound's evaluation. (None, why) when it does not apply."""
    g = S.low_rank_gap(counts, tau, d)
    if g is None:
        return None, None
    return bound + g["delta"] * (1.0 - 1e-12) - 4 * REFERENCE_RTOL * max(1.0, abs(bound)), g


def make_lowdim_claim(required_dim: Callable[[Sequence[int]], int] = T.required_dim_for_bound,
                      strict=None, shared=None, claim_id: str = "scl.theorem1.low_dim_gap") -> Claim:
    """"The Theorem 1 bound is attained iff d >= required_dim(counts)" (classes with n_c >= 2, plus one if some
    class is a singleton), in particular strictly not attained for d < k unless singletons share a direction.

    Source: Kini et al., Theorem 1 (d < k remark); the dimension count is derived here. Conditions: full batch,
    UFM+. Checked per (counts, tau, d): where d >= the claimed dimension, a construction attaining the bound and a
    proven lower bound (the strict-gap bound of ``low_rank_gap``, the exact d = 1 minimum or the certificate);
    where a gap is claimed, that proven gap above the tolerance. REFUTED by a construction that attains the bound
    at a dimension claimed to leave a gap, or a proven gap where attainment is claimed; INCONCLUSIVE when neither
    a gap nor attainment is proven."""
    def check(ctx: RunContext):
        strict_cases = strict if strict is not None else LOWDIM_STRICT + (LOWDIM_SHARED_AS_STRICT if ctx.full else [])
        cases = [(c, t, d, None) for c, t, d in strict_cases] + list(shared if shared is not None else LOWDIM_SHARED)
        for counts, tau, d, ref in cases:
            lab = _inst_label(counts, tau, d)
            need = required_dim(counts)
            bound = T.theorem1_bound(counts, tau)
            if ref is not None:
                yield close(f"spec reference [{lab}]", ref, bound, rtol=0, atol=SPEC_ATOL, what="bound")
            inst = T.SCLInstance(counts, tau, d, True)
            y = inst.labels
            exact, how = _lowdim_minimum(counts, tau, d)
            low, gap_info = _lowdim_lower(counts, tau, d, bound)
            # a construction attaining the bound at dimension d (exact: its loss equals the bound)
            H_att = T.shared_singletons_features(counts, d) if d >= T.required_dim_for_bound(counts) else None
            att = None if H_att is None else S.scl_loss(H_att, y, None, tau, grad=False)
            bounds, _ = certify_instance(inst, H_att, face=None, upper=att)
            tol = _tol(bound, bounds.allowance, inst)
            ev = {"instance": inst.to_dict(), "claimed_required_dim": need, "bound": bound, "construction_value": att,
                  "exact_minimum_at_d": exact, "proven_lower_bound": bounds.value}
            name = f"bound attained iff d >= claimed dimension [{lab}]"
            ev["rank_d_lower_bound"] = low
            ev["strict_gap"] = gap_info
            if d >= need:  # claimed: attained
                if low is not None:  # d < k with every n_c >= 2: proven strict gap
                    chk = optimum_matches(name, bound, attained=att, lower_bound=low, tol=tol,
                                          certificate=gap_info["how"], evidence=ev)
                    yield chk
                    continue
                if exact is not None:
                    chk = optimum_matches(name, bound, attained=exact, lower_bound=exact, tol=tol, certificate=how,
                                          evidence=ev)
                else:
                    chk = optimum_matches(name, bound, attained=att, lower_bound=bounds.value, tol=tol,
                                          certificate=bounds.route or "", evidence=ev)
                from proofs_check.rigorous import judge_checks

                yield from judge_checks(FAMILY, inst.to_dict(), [chk], ctx)  # judged by its statement
                continue
            # claimed: strict gap at d
            if att is not None and within(att - bound, tol):
                yield Check(name, Verdict.REFUTED, f"a construction at d = {d} (singletons sharing a direction) attains "
                            f"the bound {fmt(bound)} although d < {need} is claimed to leave a gap", ev)
            elif low is not None:
                yield condition(name, exceeds(low - bound, tol),
                                verified=f"proven lower bound at d = {d}: {fmt(low)} = bound + {fmt(low - bound, 4)} "
                                         f"({gap_info['how']})",
                                refuted="the proven gap does not exceed the tolerance", evidence=ev,
                                inconclusive=True)
            elif exact is not None:
                yield condition(name, exceeds(exact - bound, tol),
                                verified=f"the exact minimum at d = {d} ({how}) is {fmt(exact - bound, 4)} above the bound",
                                refuted=f"the exact minimum at d = {d} equals the bound", evidence=ev)
            else:
                yield Check(name, Verdict.INCONCLUSIVE, f"strict gap not proven: {how}", ev)

    return Claim(claim_id, FAMILY,
                 "Full batch, UFM+: the Theorem 1 bound is attained iff d >= (number of classes with n_c >= 2) + "
                 "(1 if some class is a singleton): with d < k it is strictly not attained, unless singleton classes "
                 "can share a direction (e.g. (3,1,1), tau = 0.5, d = 2 attains 2.460226).",
                 f"{KINI}, Theorem 1 (d < k remark); dimension count derived here", Provenance.DERIVED, check,
                 key=("gap", "claimed_required_dim"),
                 tags=("ufm+", "dimension"))


# --------------------------------------------------------------------------------------
# Theorem 2 (mini-batches, UFM+)
# --------------------------------------------------------------------------------------

def _random_batching(counts, n_batches, size, seed):
    rng = np.random.default_rng(seed)
    N = sum(counts)
    return [sorted(int(i) for i in rng.choice(N, size=size, replace=False)) for _ in range(n_batches)]


THEOREM2_BATCHINGS = [
    ((4, 4), 0.5, [[0, 1, 4, 5], [2, 3, 6, 7]]),
    ((3, 3, 3), 0.5, [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]]),
    ((5, 3, 2), 1.0, [[0, 1, 2, 5, 8], [3, 4, 6, 7, 9], [0, 1, 2, 5, 8], [0, 3], [1, 2]]),  # repeats, one-class batch
]


def make_theorem2_claim(bound: Callable = T.theorem2_bound, cases=None,
                        claim_id: str = "scl.theorem2.minibatch_bound") -> Claim:
    """Kini et al. Theorem 2 (mini-batches, UFM+, d >= k): the loss is >= the sum over batches of the per-batch
    Theorem 1 bounds (classes with one member in a batch left out), attained by the orthogonal frame.

    Source: Kini et al., Theorem 2 (reconstructed). Conditions: UFM+, d = k, any batching (repeats and one-class
    batches included; a random batching from the run's seed). Checked: the value statements of
    ``instance_checks`` (lower bound by a proven dual bound, optimum from a feasible point), judged in ball
    arithmetic under ``--rigorous``. ``bound`` is the statement: a false bound is REFUTED by a proven lower bound
    above it or a feasible point below it."""
    given = cases

    def check(ctx: RunContext):
        cases = list(given if given is not None else THEOREM2_BATCHINGS)
        if given is None:
            cases.append(((4, 3, 2), 0.3, _random_batching((4, 3, 2), 4, 5, ctx.seed)))
        if ctx.full and given is None:
            cases += [((3, 3, 2, 2), 0.8, _random_batching((3, 3, 2, 2), 6, 4, ctx.seed + s)) for s in range(1, 4)]
        for counts, tau, batches in cases:
            k = len(counts)
            lab = _inst_label(counts, tau, k, batches)
            pred = float(bound(counts, batches, tau))
            inst = T.SCLInstance(counts, tau, k, True, batches)
            parts = instance_checks(inst, starts=_starts(ctx), seed=ctx.seed, predicted_value=pred)
            # the value statements only (geometry is the corollary's business)
            yield from _relabel([c for c in _judged(inst, parts, ctx) if c.name in ("theorem-lower-bound", "optimal-value")],
                                lab)

    return Claim(claim_id, FAMILY,
                 "Mini-batches, UFM+, d >= k: L(H) >= sum_B sum_{c: n_{B,c} >= 2} n_{B,c} log(n_{B,c} - 1 + "
                 "(|B| - n_{B,c}) e^{-1/tau}), attained by the orthogonal frame for every batching (classes with one "
                 "member in a batch are left out of that batch's sum).",
                 f"{KINI}, Theorem 2", Provenance.RECONSTRUCTED, check,
                 key=("gap",), tags=("ufm+", "batching", "certified"))


# --------------------------------------------------------------------------------------
# Corollary: the OF is the unique minimiser iff C1 and C2
# --------------------------------------------------------------------------------------

UNIQUENESS_CASES = [
    ((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]]),  # C1 fails
    ((3, 3, 3), [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]]),  # C1 and C2 hold
    ((2, 2, 2), [[0, 1, 2], [2, 3, 4, 5], [0, 4, 5]]),  # C1 and C2 hold
    ((3, 1, 1), None),  # two singleton classes: C2 fails
    ((3, 3, 2), [[0, 1, 2, 3], [3, 4, 5, 6], [0, 6, 7]]),  # C1 and C2 hold
    ((2, 2, 2), [[0, 1, 2], [2, 3, 4, 5], [1, 4]]),  # C1 holds, C2 fails for classes (0, 2)
    ((2, 2), [[0, 1], [2, 3], [0, 2, 3], [1, 2, 3]]),  # literal C1 holds, refined C1 fails
]


def uniqueness_check(name: str, counts, batches, tau: float, d: int, predicted: bool | None, analysis,
                     conic: bool = True) -> list[Check]:
    """"The OF is the unique minimiser" (predicted True) or "it is not" (False), judged by proofs
    only: the geometry certificate at the OF (every minimiser within a proven radius) and the
    analysis' witness construction (a second configuration attaining the proven optimum)."""
    inst = T.SCLInstance(counts, tau, d, True, batches)
    y = inst.labels
    H2 = T.alternative_minimiser(counts, batches, d)
    bounds, face_cert = certify_instance(inst, None, face="orthogonal-frame", upper=None, conic=conic)
    b = face_cert.bounds(0.0) if face_cert is not None and face_cert.face else None
    ev = {"analysis": analysis.to_dict(), "predicted_unique": predicted, "proven_lower_bound": bounds.value,
          "certificate": None if face_cert is None else face_cert.to_dict()}
    witness = None
    if H2 is not None and is_finite(bounds.value):
        val = S.scl_loss(H2, y, batches, tau, grad=False)
        gdiff = float(np.max(np.abs(H2.T @ H2 - T.of_gram(counts))))
        ev.update(witness=analysis.witness, witness_value=val, witness_gram_diff=gdiff)
        if within(val - bounds.value, WITNESS_RTOL * max(1.0, abs(val)) + bounds.allowance) and gdiff >= NONUNIQUE_MIN \
                and bool(np.all(H2 >= 0)):
            witness = f"{analysis.witness}: loss {fmt(val)} attains the proven optimum, Gram {fmt(gdiff, 3)} from the OF's"
    proven_unique = b is not None and within(b["gram_radius"], UNIQUE_GRAM_TOL)
    if proven_unique:
        ev["gram_radius"] = b["gram_radius"]
    if predicted:
        if witness:
            return [Check(name, Verdict.REFUTED, f"predicted unique, but a second minimiser exists ({witness})", ev)]
        if proven_unique:
            return [Check(name, Verdict.VERIFIED, f"every minimiser's Gram lies within {fmt(b['gram_radius'], 3)} of the OF "
                          "Gram (strictly complementary dual certificate)", ev)]
        return [Check(name, Verdict.INCONCLUSIVE, "no geometry certificate: " + (face_cert.face_reason if face_cert
                                                                                  else "none"), ev)]
    if proven_unique:
        return [Check(name, Verdict.REFUTED, f"predicted non-unique, but every minimiser's Gram lies within "
                      f"{fmt(b['gram_radius'], 3)} of the OF Gram (strictly complementary dual certificate)", ev)]
    if witness:
        return [Check(name, Verdict.VERIFIED, f"non-unique: {witness}", ev)]
    return [Check(name, Verdict.INCONCLUSIVE, "predicted non-unique, but no witness construction attains the proven "
                  "optimum", ev)]


def make_uniqueness_claim(predict: Callable[[T.BatchingAnalysis], bool | None] = lambda an: an.of_unique,
                          cases=None, claim_id: str = "scl.corollary.uniqueness",
                          provenance: Provenance = Provenance.RECONSTRUCTED) -> Claim:
    """Kini et al.'s corollary: with mini-batches (UFM+, d >= k + 1) the orthogonal frame is the unique minimiser
    iff C1 (each class's batch-sharing graph is connected, counting only batches holding another class: the
    refinement derived here) and C2 (every class pair shares a batch with >= 2 members of one of them).

    Source: Kini et al., Corollary (C1 refined here). Conditions: UFM+, tau = 0.5; full profile adds random
    batchings whose analysis decides C1/C2. Checked by ``uniqueness_check``: uniqueness only from the geometry
    certificate at the OF (every minimiser within a proven Gram radius), non-uniqueness only from a witness
    construction attaining the proven optimum with a Gram far from the OF's. ``predict`` is the statement; a
    wrong prediction is REFUTED by the other proof; INCONCLUSIVE when neither exists; undecided cases are
    NOT_APPLICABLE."""
    def check(ctx: RunContext):
        tau = 0.5
        todo = list(cases or UNIQUENESS_CASES)
        if ctx.full and cases is None:  # random batchings: 24 instances, k 2..4, sizes 1..5
            rng = np.random.default_rng(ctx.seed)
            for _ in range(24):
                cnt = tuple(int(x) for x in rng.integers(1, 6, size=int(rng.integers(2, 5))))
                N = sum(cnt)
                bs = [sorted(int(i) for i in rng.choice(N, size=int(rng.integers(2, N + 1)), replace=False))
                      for _ in range(int(rng.integers(1, 5)))]
                if T.analyze_batching(cnt, bs, len(cnt) + 1).of_unique is not None:  # decided cases only
                    todo.append((cnt, bs))
        for counts, batches in todo:
            k = len(counts)
            d = k + 1
            an = T.analyze_batching(counts, batches, d)
            pred = predict(an)
            lab = _inst_label(counts, tau, d, batches)
            if pred is None:
                yield hypothesis_fails(f"uniqueness [{lab}]", an.reason, {"analysis": an.to_dict()})
                continue
            yield from uniqueness_check(f"uniqueness as predicted [{lab}]", counts, batches, tau, d, bool(pred), an)

    return Claim(claim_id, FAMILY,
                 "Mini-batches, UFM+, d >= k+1: the orthogonal frame is the unique minimiser iff (C1) for every class the "
                 "graph joining samples that share a batch is connected and (C2) every class pair shares a batch holding "
                 ">= 2 members of one of them. Refinement derived here: C1 edges count only from batches that also hold "
                 "another class (a one-class batch has no negatives and does not force collapse).",
                 f"{KINI}, Corollary (batching conditions); C1 refinement derived here", provenance, check,
                 key=("gram_radius",), tags=("ufm+", "batching", "uniqueness"))


# --------------------------------------------------------------------------------------
# Batch-binding
# --------------------------------------------------------------------------------------

BINDING_CASES = [
    ((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]]),
    ((3, 3, 2), [[0, 1, 3], [2, 4, 5], [6, 7]]),
    ((2, 2, 2, 1), [[0, 2], [1, 3, 4], [5, 6]]),
]


def make_binding_claim(binding: Callable = T.batch_binding, cases=None,
                       claim_id: str = "scl.corollary.batch_binding") -> Claim:
    """Batch-binding (one fixed sample of every class added to every batch) gives C1 and C2, hence a unique OF
    minimiser, when every sample is in a batch and no two classes are singletons.

    Source: Kini et al., batch-binding (reconstructed). Conditions: UFM+, tau = 0.5, d = k + 1. Checked: C1 and C2
    of the bound batching (a consistency restatement of the combinatorics) and uniqueness of the OF after binding
    by the geometry certificate (``uniqueness_check``). ``binding`` is the statement: a binding that leaves a
    non-unique minimiser is REFUTED by a witness; INCONCLUSIVE without a certificate."""
    def check(ctx: RunContext):
        tau = 0.5
        for counts, batches in (cases or BINDING_CASES):
            bound_b = binding(counts, batches)
            lab = _inst_label(counts, tau, None, batches)
            after = T.analyze_batching(counts, bound_b)
            ev = {"batches": batches, "binding": [list(b) for b in bound_b], "after": {"C1": after.C1, "C2": after.C2}}
            # a restatement of the combinatorics (the same analysis decides both): consistency only
            yield condition(f"binding gives C1 and C2 [{lab}]", after.C1 and after.C2,
                            verified="C1 and C2 hold after binding", refuted=f"after binding: {after.reason}", evidence=ev,
                            inconclusive=True, independent=False)
            yield from uniqueness_check(f"OF unique after binding [{lab}]", counts, bound_b, tau, len(counts) + 1, True,
                                        after)

    return Claim(claim_id, FAMILY,
                 "Batch-binding (one fixed sample of every class added to every batch) guarantees C1 and C2, hence a "
                 "unique OF minimiser, whenever every sample lies in some batch and no two classes are singletons.",
                 f"{KINI}, batch-binding", Provenance.RECONSTRUCTED, check, tags=("ufm+", "batching"))


# --------------------------------------------------------------------------------------
# UFM (no nonnegativity)
# --------------------------------------------------------------------------------------

GRAF_INSTANCES = [((4, 4, 4), 0.5, 2), ((4, 4, 4), 0.5, 3), ((3, 3), 1.0, 1), ((2, 2, 2, 2), 0.3, 4)]


def make_graf_claim(value: Callable = T.etf_value, geometry: str = "simplex-etf", instances=None,
                    claim_id: str = "scl.graf.balanced_etf") -> Claim:
    """Graf et al.: balanced classes, full batch, UFM (no nonnegativity), d >= k - 1: the minimum is
    N log(n - 1 + (N - n) e^{-k/((k-1) tau)}), attained exactly by the collapsed simplex ETF.

    Source: Graf et al., ICML 2021 (reconstructed). Conditions: balanced counts (else NOT_APPLICABLE), full batch;
    d < k - 1 makes the value statement NOT_APPLICABLE. Checked: two symbolic forms of the value, the spec's
    reference values, then ``instance_checks`` (proven lower bound, feasible value, ETF geometry, collapse and
    uniqueness from the closed-form dual point at the ETF or the numeric certificate). ``value`` / ``geometry``
    are the statement: a false value is REFUTED by a proven bound or a feasible point, a false geometry by the
    proven radius."""
    def check(ctx: RunContext):
        yield symbolic_zero("two forms of the ETF value agree", T.sym_etf_two_forms())
        for counts, tau, d in (instances or GRAF_INSTANCES):
            lab = _inst_label(counts, tau, d)
            if len(set(counts)) != 1:
                yield hypothesis_fails(f"balanced classes [{lab}]", "the class counts are not balanced")
                continue
            pred = float(value(counts, tau))
            ref = SPEC_REFERENCES.get((tuple(counts), tau))
            if ref is not None:
                yield close(f"spec reference [{lab}]", ref[1], pred, rtol=0, atol=SPEC_ATOL, what="ETF value")
            inst = T.SCLInstance(counts, tau, d, False)
            yield from _instance_claim_checks(inst, ctx, lab, predicted_value=pred, predicted_geometry=geometry)

    return Claim(claim_id, FAMILY,
                 "Balanced classes (n per class), full batch, UFM without nonnegativity, d >= k-1: the minimum is "
                 "N log(n - 1 + (N - n) e^{-k/((k-1) tau)}), attained exactly by a collapsed simplex ETF.",
                 f"{GRAF}, balanced SCL minimisers", Provenance.RECONSTRUCTED, check, key=("predicted", "gap"),
                 tags=("ufm", "etf", "certified"))


IMBALANCED_INSTANCES = [((5, 3, 2), 0.5), ((6, 4, 2), 1.0), ((8, 8, 2, 2), 0.5)]


def make_imbalanced_ufm_claim(geometry: str = "other", minority_closer: bool = True, instances=None,
                              claim_id: str = "scl.ufm.imbalanced_not_etf") -> Claim:
    """Kini et al. (UFM without ReLU, imbalanced classes, full batch): features collapse, the class means are neither
    a simplex ETF nor an OF, the two smallest classes' means are closer than the two largest classes', and the
    optimum is below the collapsed-ETF value.

    Source: Kini et al., discussion of SCL without ReLU under imbalance (reconstructed). Conditions: imbalanced
    counts, full batch, d = k. Checked: the certified optimum and "below the ETF value" (a feasible point below
    it; REFUTED by a proven bound at or above it), then the point statements at the polished collapsed candidate
    with the proven radius from its dual certificate and growth bound (``imbalanced_geometry_checks``).
    ``geometry`` / ``minority_closer`` are the statement: false ones are REFUTED when the radius excludes them;
    INCONCLUSIVE without a certificate."""
    def check(ctx: RunContext):
        for counts, tau in (instances or IMBALANCED_INSTANCES):
            k = len(counts)
            lab = _inst_label(counts, tau, k)
            inst = T.SCLInstance(counts, tau, k, False)
            parts = instance_checks(inst, starts=_starts(ctx), seed=ctx.seed)
            yield from _relabel([c for c in _judged(inst, parts, ctx)
                                 if c.name in ("certified-optimum", "optimum-below-etf-value")], lab)
            H = parts["sol"].variables["H"]
            names = {"collapse": f"within-class collapse [{lab}]", "geometry": f"class means are {geometry} [{lab}]",
                     "minority": ("minority classes closer" if minority_closer else "majority classes closer") + f" [{lab}]"}
            yield from imbalanced_geometry_checks(inst, H, claimed_geometry=geometry, minority_closer=minority_closer,
                                                  names=names)

    return Claim(claim_id, FAMILY,
                 "Imbalanced classes, full batch, UFM without nonnegativity: features collapse but the class means are "
                 "not a simplex ETF (nor an OF); minority classes sit closer to each other than majority classes, and "
                 "the optimum is below the ETF configuration's value.",
                 f"{KINI}, discussion of SCL without ReLU under imbalance", Provenance.RECONSTRUCTED, check,
                 key=("gap",), tags=("ufm", "imbalance", "certified"))


MINIBATCH_UFM = [((3, 3, 3), 0.5, [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]])]


def make_minibatch_ufm_claim(etf_optimal: bool = False, claim_id: str = "scl.ufm.minibatch_not_etf") -> Claim:
    """Kini et al. (UFM without ReLU, mini-batches): the collapsed simplex ETF is not the minimiser in general,
    even with balanced classes.

    Source: Kini et al., SCL without ReLU under batching (reconstructed). Conditions: a balanced (3,3,3) batching,
    tau = 0.5, d = k. Checked: the certified optimum and "min < ETF value" by a feasible (solver) point below the
    ETF's value by more than the tolerance. ``etf_optimal=True`` states the opposite ("the ETF is optimal"),
    REFUTED by that feasible point below it; INCONCLUSIVE when neither side is proven."""
    def check(ctx: RunContext):
        for counts, tau, batches in MINIBATCH_UFM:
            k = len(counts)
            lab = _inst_label(counts, tau, k, batches)
            inst = T.SCLInstance(counts, tau, k, False, batches)
            parts = instance_checks(inst, starts=_starts(ctx), seed=ctx.seed)
            etf_conf = parts["feasible"]["collapsed ETF"]
            if etf_optimal:
                # the (false) statement "the collapsed ETF is optimal": its value must be the certified optimum
                b = parts["bounds"]
                yield optimum_matches(f"ETF is optimal [{lab}]", etf_conf, attained=parts["sol"].value, lower_bound=b.value,
                                      tol=_tol(etf_conf, b.allowance, inst), certificate=b.route or "")
                continue
            yield from _relabel([c for c in _judged(inst, parts, ctx) if c.name in ("certified-optimum", "etf-not-minimiser")],
                                lab)

    return Claim(claim_id, FAMILY,
                 "Mini-batches without nonnegativity (UFM): no single geometry is optimal for every batch, so the "
                 "collapsed simplex ETF is not the minimiser in general, even with balanced classes.",
                 f"{KINI}, SCL without ReLU under batching", Provenance.RECONSTRUCTED, check,
                 tags=("ufm", "batching", "certified"))


RELU_COST_INSTANCES = [((4, 4, 4), 0.5), ((3, 3), 1.0), ((2, 2, 2, 2), 0.2)]


def make_relu_cost_claim(cost: Callable = T.relu_cost, instances=None,
                         claim_id: str = "scl.relu_cost_positive") -> Claim:
    """The cost of ReLU on balanced data: (Theorem 1 value) - (collapsed-ETF value) > 0, and it equals the certified
    UFM+ optimum minus the certified UFM optimum.

    Source: Kini et al., Theorem 1 vs Graf et al. (reconstructed). Conditions: balanced counts (else
    NOT_APPLICABLE), full batch, d = k. Checked: the symbolic sign of the exponent gap, then the cost interval
    [LB_UFM+ - ETF value, OF value - LB_UFM] from proven lower bounds and feasible values. ``cost`` is the
    statement: REFUTED when it lies outside the certified interval by more than the tolerance; INCONCLUSIVE when
    the interval is wider than the tolerance or a bound is missing."""
    def check(ctx: RunContext):
        yield symbolic_true("k/((k-1) tau) > 1/tau, so e^{-1/tau} > e^{-k/((k-1) tau)}", T.sym_relu_cost_positive())
        for counts, tau in (instances or RELU_COST_INSTANCES):
            lab = _inst_label(counts, tau)
            pred = cost(counts, tau)
            if pred is None:
                yield hypothesis_fails(f"balanced [{lab}]", "ReLU cost is defined for balanced counts only")
                continue
            k = len(counts)
            y = T.labels_from_counts(counts)
            # UFM+ optimum in [LB_dnn, OF value]; UFM optimum in [LB_sdp, ETF value]: the cost lies in
            # [LB_dnn - ETF value, OF value - LB_sdp]
            inst_p = T.SCLInstance(counts, tau, k, True)
            inst_u = T.SCLInstance(counts, tau, k, False)
            of_val = S.scl_loss(T.of_features(counts, k), y, None, tau, grad=False)
            etf_val = S.scl_loss(T.etf_features(counts, k), y, None, tau, grad=False)
            bp, _ = certify_instance(inst_p, T.of_features(counts, k), upper=of_val)
            bu, _ = certify_instance(inst_u, T.etf_features(counts, k), upper=etf_val)
            tol = _tol(of_val, bp.allowance + bu.allowance, inst_p)
            ev = {"predicted_cost": pred, "dnn_interval": [bp.value, of_val], "sdp_interval": [bu.value, etf_val],
                  "tolerance": tol}
            if not (is_finite(bp.value) and is_finite(bu.value)):
                yield Check(f"cost = UFM+ optimum - UFM optimum [{lab}]", Verdict.INCONCLUSIVE, "no proven bound", ev)
                continue
            lo, hi = bp.value - etf_val, of_val - bu.value
            ev["cost_interval"] = [lo, hi]
            if not is_finite(pred):  # a non-finite prediction is never inside the interval nor a witness
                yield Check(f"cost = UFM+ optimum - UFM optimum [{lab}]", Verdict.INCONCLUSIVE,
                            f"the predicted cost {fmt(pred)} is not a finite number", ev)
            elif exceeds(lo - pred, tol) or exceeds(pred - hi, tol):
                yield Check(f"cost = UFM+ optimum - UFM optimum [{lab}]", Verdict.REFUTED,
                            f"the certified cost lies in [{fmt(lo)}, {fmt(hi)}], predicted {fmt(pred)}", ev)
            elif within(hi - lo, tol) and within(lo - pred, tol) and within(pred - hi, tol):
                yield Check(f"cost = UFM+ optimum - UFM optimum [{lab}]", Verdict.VERIFIED,
                            f"certified cost in [{fmt(lo)}, {fmt(hi)}] contains the predicted {fmt(pred)}", ev)
            else:
                yield Check(f"cost = UFM+ optimum - UFM optimum [{lab}]", Verdict.INCONCLUSIVE,
                            f"certified interval [{fmt(lo)}, {fmt(hi)}] wider than the tolerance", ev)
            yield condition(f"cost positive [{lab}]", lo > tol, verified=f"certified cost >= {fmt(lo)} > 0",
                            refuted=f"certified cost lower end {fmt(lo)} is not > 0", evidence=ev,
                            inconclusive=not exceeds(0.0 - hi, tol))

    return Claim(claim_id, FAMILY,
                 "Cost of ReLU on balanced data: the Theorem 1 value minus the collapsed-ETF value is strictly positive "
                 "(and equals the difference of the certified UFM+ and UFM optima).",
                 f"{KINI}, Theorem 1 vs {GRAF}", Provenance.RECONSTRUCTED, check, tags=("ufm+", "ufm"))


def make_centering_claim(weighted_cosines: Callable = T.weighted_centering_cosines,
                         claim_id: str = "scl.centering_of_to_etf") -> Claim:
    """Centring an orthogonal frame by the unweighted mean of its vectors gives a simplex ETF; by the sample-weighted
    mean it does not under imbalance ((5,3,2): cosines -0.7715, -0.5244, -0.1373).

    Source: docs/scl.md (derived). Conditions: none (k = 2..6 symbolically, (5,3,2) numerically). Checked: the
    centred OF Gram equals J_k (sympy), the weighted cosines against the four-decimal reference, and the
    classification of the weighted result. ``weighted_cosines`` is the statement: other cosines are REFUTED by
    the reference, an ETF classification by the geometry check."""
    def check(ctx: RunContext):
        for k in range(2, 7):
            M = T.sym_centering_of_to_etf(k)
            yield symbolic_zero(f"centred OF Gram = J_k (k = {k})", sum(abs(x) for x in M), note="entrywise")
        cos = weighted_cosines((5, 3, 2))
        # docs/scl.md (geometry conventions), 4 decimals
        yield close("sample-weighted centring of the OF, n = (5,3,2)", [-0.7715, -0.5244, -0.1373],
                    [cos[0, 1], cos[0, 2], cos[1, 2]], rtol=0, atol=5e-5, what="pairwise cosines")
        G = np.asarray(cos, dtype=float)
        if not np.all(np.isfinite(G)):  # a non-finite Gram has no geometry class (never a witness)
            yield Check("sample-weighted centring is not an ETF, n = (5,3,2)", Verdict.INCONCLUSIVE,
                        "the predicted cosines are not finite numbers: no geometry to classify", {})
        else:
            yield geometry_is("sample-weighted centring is not an ETF, n = (5,3,2)", "other", classify_gram(G))

    return Claim(claim_id, FAMILY,
                 "Centring an orthogonal frame by the unweighted mean of its vectors gives a simplex ETF; centring by "
                 "the sample-weighted mean does not under imbalance ((5,3,2): cosines -0.7715, -0.5244, -0.1373).",
                 "docs/scl.md (OF -> ETF by centring; geometry conventions)", Provenance.DERIVED, check, tags=("geometry",))


def make_tau_limits_claim(limits: Callable[[int, int], tuple[float, float]] = T.tau_limits,
                          claim_id: str = "scl.tau_limits") -> Claim:
    """The per-anchor bound log(n_c - 1 + (N - n_c) e^{-1/tau}) tends to log(n_c - 1) as tau -> 0+ and to log(N - 1)
    as tau -> infinity.

    Source: Kini et al., Theorem 1 (limits; derived). Conditions: n >= 2, N > n. Checked: both limits by sympy,
    then ``limits(n, N)`` against the bound evaluated at tau = 1e-2 and 1e8 (the corrections are below the stated
    tolerances there). ``limits`` is the statement: wrong limits are REFUTED by the numeric evaluations."""
    def check(ctx: RunContext):
        low, high = T.sym_tau_limits()
        yield symbolic_zero("lim_{tau->0+} bound = log(n-1)", low)
        yield symbolic_zero("lim_{tau->oo} bound = log(N-1)", high)
        for n, N in [(2, 5), (5, 10), (3, 12)]:
            lo, hi = limits(n, N)
            # at tau = 1e-2 the correction is (N-n) e^{-100}/(n-1) < 1e-40; at tau = 1e8 it is O(1/tau)
            yield close(f"tau = 1e-2, n={n}, N={N}", lo, T.per_anchor_bound(n, N, 1e-2), rtol=0, atol=1e-15)
            yield close(f"tau = 1e8, n={n}, N={N}", hi, T.per_anchor_bound(n, N, 1e8), rtol=0, atol=1e-7)

    return Claim(claim_id, FAMILY,
                 "The per-anchor bound log(n_c - 1 + (N - n_c) e^{-1/tau}) tends to log(n_c - 1) as tau -> 0+ and to "
                 "log(N - 1) as tau -> infinity.", f"{KINI}, Theorem 1 (limits)", Provenance.DERIVED, check,
                 tags=("symbolic",))


CLAIMS = [
    make_theorem1_claim(),
    make_lowdim_claim(),
    make_theorem2_claim(),
    make_uniqueness_claim(),
    make_binding_claim(),
    make_graf_claim(),
    make_imbalanced_ufm_claim(),
    make_minibatch_ufm_claim(),
    make_relu_cost_claim(),
    make_centering_claim(),
    make_tau_limits_claim(),
]
