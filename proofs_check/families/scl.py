"""CLI for the supervised contrastive loss: ``solve scl``, ``batching``, ``table scl``."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from proofs_check.commands import (ExtraCommand, SolveCommand, TableCommand, UsageError, add_backend_arguments,
                                   backend_from_args, float_list, int_list)
from proofs_check.core import (Check, Verdict, at_certified_point, clean, condition, fmt, geometry_is, hypothesis_fails,
                               lower_bound_holds, optimum_matches, worst)
from proofs_check.tables import Table
from theory import scl as T
from theory.geometry import class_means, classify_gram, cosine_matrix, nc_metrics, within_class_max_deviation

#: tolerances shared with the claims (one definition, see proofs_check/claims/scl.py)
from proofs_check.claims.scl import COLLAPSE_TOL, NONUNIQUE_MIN, UNIQUE_TOL, VALUE_RTOL  # noqa: E402

CONVENTION = ("unit-norm features, logits h.h'/tau, loss summed over anchors (no 1/N); "
              "Theorem 1 bound: sum over classes with n_c >= 2 of n_c log(n_c - 1 + (N - n_c) e^{-1/tau})")


def _counts(values) -> tuple[int, ...]:
    if values is None:
        raise UsageError("--counts is required (e.g. --counts 5,3,2)")
    return tuple(values)


def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--counts", type=int_list, required=True, help="class sizes, e.g. 5,3,2 (samples indexed class by class)")
    p.add_argument("--tau", type=float, required=True, help="temperature > 0")
    p.add_argument("--dim", type=int, default=None, help="feature dimension d (default k + 1)")
    p.add_argument("--nonneg", action=argparse.BooleanOptionalAction, default=True,
                   help="UFM+ (nonnegative features, default) or --no-nonneg for the plain UFM")
    p.add_argument("--batches", default=None, help='mini-batches as "0,1,4,5;2,3,6,7" (default: full batch)')
    p.add_argument("--binding", action="store_true", help="apply batch-binding (one sample of every class in every batch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--starts", type=int, default=6, help="random starts of the factored solver (d = k has local minima)")
    p.add_argument("--solver", choices=("CLARABEL", "SCS"), default="CLARABEL", help="solver of the convex certificate")
    p.add_argument("--hops", type=int, default=20,
                   help="full batch: up to this many perturbation restarts from the best point while its value is "
                        "not certified by the lower bound (numpy backend; default 20, 0 to disable)")
    add_backend_arguments(p)


def _instance(args) -> T.SCLInstance:
    counts = _counts(args.counts)
    batches = T.parse_batches_text(args.batches) if args.batches is not None else None
    if args.binding:
        if batches is None:
            raise UsageError("--binding needs --batches (the full batch already holds every class)")
        batches = T.batch_binding(counts, batches)
    d = args.dim if args.dim is not None else len(counts) + 1
    return T.SCLInstance(counts, args.tau, d, args.nonneg, batches)


def solve_scl(args) -> dict:
    from solvers import scl as S

    inst = _instance(args)
    y = inst.labels
    k, N, tau, d = inst.k, inst.N, inst.tau, inst.d
    backend = backend_from_args(args)
    if args.hops < 0:
        raise UsageError(f"--hops must be >= 0, got {args.hops}")
    relax = None
    if N <= S.MAX_CERTIFICATE_SAMPLES:
        relax = S.gram_relaxation(inst.counts, inst.batches, tau, nonneg=inst.nonneg, solver=args.solver)
    elif inst.full_batch and k <= S.REDUCED_CONIC_MAX_CLASSES:
        # symmetry reduces the N x N relaxation to a k x k class matrix (same value)
        relax = S.class_reduced_relaxation(inst.counts, tau, nonneg=inst.nonneg, solver=args.solver)
    elif inst.full_batch:  # beyond a conic solver's reach: the dual bound of the k x k relaxation
        relax = S.class_reduced_dual(inst.counts, tau, nonneg=inst.nonneg, candidates=S.reduced_candidates(inst))
    # Hop while the best point is not certified by the (prediction-free) lower bound of the relaxation.
    hop_until = relax.value + VALUE_RTOL * max(1.0, abs(relax.value)) if relax is not None and relax.ok else None
    hops = args.hops if hop_until is not None and inst.full_batch else 0
    sol = S.solve_factored(inst, starts=args.starts, seed=args.seed, hops=hops, hop_until=hop_until, **backend)
    H = sol.variables["H"]
    if relax is not None and relax.solver == "kkt-dual":  # add the solver's point as a candidate
        relax = S.class_reduced_dual(inst.counts, tau, nonneg=inst.nonneg, candidates=S.reduced_candidates(inst, H))
    checks: list[Check] = []
    predicted: dict = {"value": None, "theorem": None, "geometry": None,
                       "theorem1_bound": T.theorem1_bound(inst.counts, tau), "etf_value": T.etf_value(inst.counts, tau)}
    analysis = T.analyze_batching(inst.counts, inst.batches, max(d, k)) if inst.batches is not None else None
    certificate = None
    lower = None
    if relax is not None and relax.ok:
        certificate = {"lower_bound": relax.value, "gap": sol.value - relax.value,
                       "method": f"convex Gram relaxation ({relax.kind}, {relax.solver})", "status": relax.status}
        lower = relax.value
    elif relax is not None:
        certificate = {"lower_bound": None, "gap": None, "method": f"convex Gram relaxation ({relax.kind})",
                       "status": relax.status}

    def of_diff():
        return None if relax is None or not relax.ok else relax.distance_to(T.of_gram(inst.counts))

    if inst.nonneg:
        bound = T.theorem2_bound(inst.counts, inst.batches, tau)
        name = "Theorem 1" if inst.full_batch else "Theorem 2"
        predicted.update(value=bound, theorem=f"Kini et al. {name} (reconstructed)", geometry="orthogonal-frame")
        tol = VALUE_RTOL * max(1.0, abs(bound))
        checks.append(lower_bound_holds("bound holds at the solver's point", bound, sol.value, tol=tol))
        if relax is None and d >= k:  # mini-batches beyond the convex certificate's size
            certificate = {"lower_bound": bound, "gap": sol.value - bound, "method": f"theorem bound ({name})"}
            lower = bound
        need = T.required_dim_for_bound(inst.counts) if inst.full_batch else k
        if d < k:
            if inst.full_batch:
                reason = (f"d = {d} < k = {k}: no orthogonal frame exists"
                          + ("; singleton classes can share a direction, so the bound is still attained"
                             if d >= need else f"; the bound needs d >= {need} and is not attained (strict gap)"))
            else:
                reason = (f"d = {d} < k = {k}: no orthogonal frame exists, so attainment of the Theorem 2 bound "
                          f"is not predicted; best value found is {fmt(sol.value)} (bound {fmt(bound)})")
            checks.append(hypothesis_fails("d >= k", reason, {"found_value": sol.value, "bound": bound,
                                                              "gap_to_bound": sol.value - bound, "required_dim": need}))
        else:
            checks.append(optimum_matches(f"{name} bound is the optimum", bound, attained=sol.value, lower_bound=lower,
                                          tol=tol, converged=sol.converged,
                                          certificate=(certificate or {}).get("method", "")))
            singles = [c for c, n in enumerate(inst.counts) if n == 1]
            if inst.full_batch and len(singles) >= 2:
                checks.append(hypothesis_fails(
                    "unique minimiser", f"classes {singles[:2]} are singletons and never constrained against each other: "
                    "non-unique minimiser (they may share a direction)",
                    {"relaxation_interior_diff_to_OF": of_diff()}))
            elif analysis is not None and analysis.of_unique is not True:
                ev = {"analysis": analysis.to_dict(), "relaxation_interior_diff_to_OF": of_diff()}
                H2 = T.alternative_minimiser(inst.counts, inst.batches, max(d, k + 1))
                if H2 is not None:
                    ev["second_minimiser_value"] = S.scl_loss(H2, y, inst.batches, tau, grad=False)
                    ev["second_minimiser_gram_diff"] = float(np.max(np.abs(H2.T @ H2 - T.of_gram(inst.counts))))
                    ev["second_minimiser_needs_dim"] = int(np.max(np.nonzero(H2.any(axis=1))[0]) + 1)
                txt = "non-unique minimiser: " + analysis.reason if analysis.of_unique is False else analysis.reason
                if "second_minimiser_value" in ev:
                    txt += (f"; second minimiser ({analysis.witness}) has loss {fmt(ev['second_minimiser_value'])} and "
                            f"a Gram {fmt(ev['second_minimiser_gram_diff'], 3)} from the OF's")
                if ev["relaxation_interior_diff_to_OF"] is not None:
                    txt += f"; relaxation interior is {fmt(ev['relaxation_interior_diff_to_OF'], 3)} from the OF Gram"
                checks.append(hypothesis_fails("C1 and C2 (unique minimiser)", txt, ev))
            else:
                at_opt = dict(value=sol.value, lower_bound=lower, tol=tol, converged=sol.converged)
                checks.append(at_certified_point(
                    geometry_is("optimal class means", "orthogonal-frame", classify_gram(_mean_gram(H, y))), **at_opt))
                dev = within_class_max_deviation(H, y)
                checks.append(at_certified_point(
                    condition("within-class collapse", dev <= COLLAPSE_TOL, verified=f"max deviation {fmt(dev, 3)}",
                              refuted=f"max deviation {fmt(dev, 3)}", evidence={"max_deviation": dev}), **at_opt))
                diff = of_diff()
                if diff is not None:
                    v = Verdict.VERIFIED if diff <= UNIQUE_TOL else (Verdict.REFUTED if diff >= NONUNIQUE_MIN else Verdict.INCONCLUSIVE)
                    checks.append(Check("relaxation interior equals the OF Gram", v, f"max diff {fmt(diff, 3)}",
                                        {"max_abs_diff": diff}))
    else:
        etf = T.etf_value(inst.counts, tau)
        if inst.full_batch and inst.balanced and inst.counts[0] >= 2:
            predicted.update(value=etf, theorem="Graf et al. balanced ETF value (reconstructed)", geometry="simplex-etf")
            tol = VALUE_RTOL * max(1.0, abs(etf))
            if d < k - 1:
                checks.append(hypothesis_fails("d >= k-1", f"d = {d} < k - 1 = {k - 1}: no simplex ETF exists",
                                               {"found_value": sol.value, "etf_value": etf}))
            else:
                checks.append(optimum_matches("ETF value is the optimum", etf, attained=sol.value, lower_bound=lower,
                                              tol=tol, converged=sol.converged,
                                              certificate=(certificate or {}).get("method", "")))
                checks.append(at_certified_point(
                    geometry_is("optimal class means", "simplex-etf", classify_gram(_mean_gram(H, y))),
                    value=sol.value, lower_bound=lower, tol=tol, converged=sol.converged))
        else:
            tol = VALUE_RTOL * max(1.0, abs(etf))
            gap = None if lower is None else sol.value - lower
            certified = gap is not None and gap <= tol and sol.converged
            if not certified:
                checks.append(Check("certified optimum", Verdict.INCONCLUSIVE,
                                    "no certificate within tolerance" if gap is None else f"certificate gap {fmt(gap, 3)}",
                                    {"gap": gap}))
            elif inst.full_batch and k >= 3:
                checks.append(condition("imbalanced UFM optimum below the ETF value", sol.value < etf - tol,
                                        verified=f"optimum {fmt(sol.value)} < ETF value {fmt(etf)}",
                                        refuted=f"optimum {fmt(sol.value)} not below ETF value {fmt(etf)}"))
                checks.append(geometry_is("optimal class means (not an ETF under imbalance)", "other",
                                          classify_gram(_mean_gram(H, y))))
            else:
                checks.append(Check("no closed-form prediction", Verdict.INCONCLUSIVE,
                                    "hypothesis fails: no theorem predicts the UFM optimum for this instance "
                                    "(mini-batches or k = 2 imbalanced); the certified optimum is reported",
                                    {"gap": gap}))
    cls = classify_gram(_mean_gram(H, y))
    dev = within_class_max_deviation(H, y)
    geometry = {"classification": cls.classification, "distance_etf": cls.distance_etf, "distance_of": cls.distance_of,
                "class_mean_cosines": cosine_matrix(class_means(H, y)),
                "metrics": nc_metrics(H, y).to_dict(), "within_class_max_deviation": dev,
                "collapsed": bool(dev <= COLLAPSE_TOL)}
    verdict = worst(c.verdict for c in checks)
    bad = [c for c in checks if c.verdict == verdict and verdict != Verdict.VERIFIED]
    reason = "; ".join(f"{c.name}: {c.reason}" for c in bad[:2]) if bad else f"all {len(checks)} checks hold"
    out = {"family": "scl", "instance": inst.to_dict(), "predicted": predicted,
           "solution": {**sol.to_dict(), "start_values": sol.diagnostics.get("start_values")},
           "certificate": certificate, "geometry": geometry, "verdict": verdict.value, "reason": reason,
           "claims": [{"id": f"scl.instance.{c.name}", "verdict": c.verdict.value, "reason": c.reason,
                       "evidence": clean(c.evidence)} for c in checks]}
    if analysis is not None:
        out["batching"] = analysis.to_dict()
    return out


def _mean_gram(H, y):
    M = class_means(H, y)
    return M.T @ M


# ---- batching ------------------------------------------------------------------------------

def _batching_args(p):
    p.add_argument("--counts", type=int_list, required=True, help="class sizes, e.g. 4,4")
    p.add_argument("--batches", required=True, help='mini-batches as "0,1,4,5;2,3,6,7"')
    p.add_argument("--dim", type=int, default=None, help="feature dimension (default k + 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def batching_report(args) -> dict:
    counts = _counts(args.counts)
    batches = T.parse_batches_text(args.batches)
    an = T.analyze_batching(counts, batches, args.dim)
    bind = T.batch_binding(counts, batches)
    an_b = T.analyze_batching(counts, bind, an.d)
    out = an.to_dict()
    out.update(binding=[list(b) for b in bind], binding_C1=an_b.C1, binding_C2=an_b.C2,
               binding_of_unique=an_b.of_unique, binding_reason=an_b.reason)
    return out


def run_batching(args) -> int:
    out = batching_report(args)
    if args.json:
        print(json.dumps(clean(out), indent=2, allow_nan=False))
        return 0
    k = len(out["counts"])
    lines = [f"counts {tuple(out['counts'])}, {len(out['batches'])} batches, d = {out['d']}"]
    lines.append("C1 (same-batch graph of each class connected; edges from batches with >= 2 classes):")
    for c in range(k):
        comps = out["C1_components"][str(c)]
        lines.append(f"  class {c}: {'yes' if out['C1_per_class'][str(c)] else 'NO '}  components {comps}"
                     + ("" if out["C1_literal_per_class"][str(c)] == out["C1_per_class"][str(c)]
                        else "  (connected only through one-class batches)"))
    lines.append("C2 (some batch holds both classes and >= 2 members of one):")
    for pair, v in out["C2_per_pair"].items():
        lines.append(f"  classes ({pair}): {'yes' if v else 'NO'}")
    u = out["of_unique"]
    lines.append(f"C1: {out['C1']}, C2: {out['C2']}; orthogonal frame unique at d = {out['d']}: "
                 f"{'undecided' if u is None else u} ({out['reason']})")
    for n in out["notes"]:
        lines.append(f"note: {n}")
    lines.append("batch-binding: " + "; ".join(",".join(map(str, b)) for b in out["binding"]))
    lines.append(f"  after binding: C1 {out['binding_C1']}, C2 {out['binding_C2']}, OF unique: {out['binding_of_unique']}")
    print("\n".join(lines))
    return 0


# ---- table ---------------------------------------------------------------------------------

def _table_args(p):
    p.add_argument("--counts", type=int_list, action="append", default=None,
                   help="class sizes, e.g. 5,3,2 (repeatable)")
    p.add_argument("--tau", type=float_list, required=True, help="temperatures, e.g. 0.1,0.5,1")
    p.add_argument("--profile", choices=("step", "longtail"), default=None, help="generate counts from an imbalance profile")
    p.add_argument("--classes", type=int, default=None, help="profile: number of classes K")
    p.add_argument("--majority", type=int, default=None, help="profile: majority class size")
    p.add_argument("--ratio", type=float, default=None, help="profile: imbalance ratio R >= 1")
    p.add_argument("--step-fraction", type=float, default=0.5, help="STEP profile: fraction rho of majority classes")


def build_table(args) -> Table:
    sets = [tuple(c) for c in (args.counts or [])]
    if args.profile is not None:
        missing = [n for n in ("classes", "majority", "ratio") if getattr(args, n) is None]
        if missing:
            raise UsageError(f"--profile {args.profile} needs --{' --'.join(missing)}")
        if args.profile == "step":
            sets.append(T.step_counts(args.classes, args.majority, args.ratio, args.step_fraction))
        else:
            sets.append(T.longtail_counts(args.classes, args.majority, args.ratio))
    if not sets:
        raise UsageError("give --counts or --profile")
    if not args.tau:
        raise UsageError("--tau needs at least one temperature")
    rows = []
    for counts in sets:
        for tau in args.tau:
            inst = T.SCLInstance(counts, tau, len(counts), True)  # validates counts and tau
            N = inst.N
            b = T.theorem1_bound(counts, tau)
            lim0 = float(sum(n * math.log(n - 1) for n in counts if n >= 2))
            liminf = float(sum(n * math.log(N - 1) for n in counts if n >= 2))
            rows.append([",".join(map(str, counts)), inst.tau, N, b, b / N, T.etf_value(counts, tau),
                         T.relu_cost(counts, tau), lim0, liminf])
    cols = ["counts", "tau", "N", "theorem1_bound", "bound_per_sample", "etf_value", "relu_cost",
            "bound_tau_to_0", "bound_tau_to_inf"]
    latex = ["$n_c$", r"$\tau$", "$N$", r"$\mathcal{L}^\star_{\mathrm{OF}}$", r"$\mathcal{L}^\star_{\mathrm{OF}}/N$",
             r"$\mathcal{L}_{\mathrm{ETF}}$", "ReLU cost", r"$\tau\to0^+$", r"$\tau\to\infty$"]
    caption = ("SCL lower bounds (Kini et al., ICLR 2024, Theorem 1, reconstructed) and collapsed-ETF values "
               f"(Graf et al., ICML 2021). Convention: {CONVENTION}. ReLU cost = bound - ETF value, balanced counts only "
               "(null otherwise). Last two columns: limits of the bound as tau -> 0+ (sum n_c log(n_c - 1)) and "
               "tau -> infinity (sum n_c log(N - 1)).")
    return Table(cols, rows, caption=caption, latex_columns=latex, meta={"family": "scl", "convention": CONVENTION})


COMMANDS = [
    SolveCommand("scl", "supervised contrastive loss: minimise, certify and compare with Theorems 1/2 or the ETF value",
                 _solve_args, solve_scl),
    ExtraCommand("batching", "SCL batching conditions C1/C2, uniqueness of the orthogonal frame, batch-binding",
                 _batching_args, run_batching),
    TableCommand("scl", "SCL bounds per (counts, tau): Theorem 1, ETF value, ReLU cost, tau limits",
                 _table_args, build_table),
]
