"""CLI for the supervised contrastive loss: ``solve scl``, ``batching``, ``table scl``."""

from __future__ import annotations

import argparse
import json
import math

from proofs_check.commands import (ExtraCommand, SolveCommand, TableCommand, UsageError, add_backend_arguments,
                                   backend_from_args, float_list, int_list)
from proofs_check.core import clean
from proofs_check.tables import Table, rigorous_table
from theory import scl as T

CONVENTION = ("unit-norm features, logits h.h'/tau, loss summed over anchors (no 1/N); "
              "Theorem 1 bound: sum over classes with n_c >= 2 of n_c log(n_c - 1 + (N - n_c) e^{-1/tau})")


#: Most random starts of the factored solver accepted (a start costs at least MIN_EVALS_PER_START evaluations; the
#: work budget refuses far fewer at any real size).
MAX_STARTS = 1000


def _counts(values) -> tuple[int, ...]:
    if values is None:
        raise UsageError("--counts is required (e.g. --counts 5,3,2)")
    if not values:
        raise UsageError("--counts must list at least 2 class sizes (e.g. --counts 5,3,2), got none")
    return tuple(values)


def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--counts", type=int_list, required=True, help="class sizes, e.g. 5,3,2 (samples indexed class by class)")
    p.add_argument("--tau", type=float, required=True,
                   help=f"temperature in [{T.TAU_MIN:g}, {T.TAU_MAX:g}]")
    p.add_argument("--dim", type=int, default=None, help="feature dimension d (default k + 1)")
    p.add_argument("--nonneg", action=argparse.BooleanOptionalAction, default=True,
                   help="UFM+ (nonnegative features, default) or --no-nonneg for the plain UFM")
    p.add_argument("--batches", default=None, help='mini-batches as "0,1,4,5;2,3,6,7" (default: full batch)')
    p.add_argument("--binding", action="store_true", help="apply batch-binding (one sample of every class in every batch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--starts", type=int, default=None,
                   help="random starts of the factored solver (default 6; d = k has local minima)")
    p.add_argument("--solver", choices=("CLARABEL", "SCS"), default="CLARABEL", help="conic solver proposing a candidate point")
    p.add_argument("--hops", type=int, default=None,
                   help="full batch: up to this many perturbation restarts from the best point while its value is "
                        "not certified by the lower bound (numpy backend; default 20, 0 to disable)")
    p.add_argument("--activation", choices=("relu", "relu6", "softplus", "sigmoid", "gelu", "silu", "leaky-relu"),
                   default=None,
                   help="features h = f(v)/||f(v)|| for this activation (overrides --nonneg): relu, relu6 -> UFM+ (OF, "
                        "bound attained); softplus, sigmoid -> the bound is an infimum no feature attains; gelu, silu, "
                        "leaky-relu -> every direction is realised: the UFM without ReLU (docs/scl.md, Other activations)")
    p.add_argument("--method", choices=("auto", "factored"), default="auto",
                   help="auto (default): certificate first - where the proven bounds certify the predicted closed form "
                        "the factored solver runs only as a bounded confirmation (work budget); factored: always run "
                        "the multi-start factored solver")
    add_backend_arguments(p)


def _instance(args) -> T.SCLInstance:
    counts = _counts(args.counts)
    batches = T.parse_batches_text(args.batches) if args.batches is not None else None
    if args.binding:
        if batches is None:
            raise UsageError("--binding needs --batches (the full batch already holds every class)")
        batches = T.batch_binding(counts, batches)
    d = args.dim if args.dim is not None else len(counts) + 1
    if not 1 <= d <= T.MAX_DIM:
        raise UsageError(f"--dim: d must be >= 1 and <= {T.MAX_DIM}, got {d}" if d >= 1 else f"--dim: d must be >= 1, got {d}")
    return T.SCLInstance(counts, args.tau, d, args.nonneg, batches)


def solve_scl(args):
    from proofs_check.claims.scl import check_instance

    inst = _instance(args)
    typed = [o for o, v in (("--starts", args.starts), ("--hops", args.hops)) if v is not None]
    args.starts = 6 if args.starts is None else args.starts
    args.hops = 20 if args.hops is None else args.hops
    act = getattr(args, "activation", None)
    if act is not None:
        cat = T.activation_category(act)
        inst = T.SCLInstance(inst.counts, inst.tau, inst.d, cat != "signed", inst.batches)
    if args.hops < 0:
        raise UsageError(f"--hops must be >= 0, got {args.hops}")
    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1, got {args.starts}")
    if args.starts > MAX_STARTS:
        raise UsageError(f"--starts must be <= {MAX_STARTS}, got {args.starts}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    cert_first = args.method == "auto" and T.certificate_first_applies(inst)
    T.check_budget(inst, starts=args.starts, hops=args.hops, factored=not cert_first)  # before the backend is resolved
    backend = backend_from_args(args)
    rep = check_instance(inst, starts=args.starts, seed=args.seed, hops=args.hops, solver=args.solver,
                         backend_opts=backend, method=args.method)
    if typed and any(c.name == "confirmation-solve" for c in rep.claims):
        # the certificate decided: the typed search options were not used, which the report did not say
        rep.diagnostics.append(f"{' and '.join(typed)} not used: the certificate at the predicted configuration "
                               "decided every statement and the factored solver ran only as the bounded confirmation "
                               "(one start, no hops); --method factored runs the multi-start search")
    if act is not None:
        rep = _with_activation(rep, inst, act)
    return rep  # live: `solve scl --rigorous` bounds the candidate features it holds (no second solve)


def _with_activation(rep, inst, act: str):
    """The report of the UFM+ / UFM instance the activation reduces to, with the activation's own statements
    (proofs_check.claims.scl_thread.activation_checks). For softplus / sigmoid no minimiser exists: the value
    statement becomes the infimum's and the statements about the minimiser are not applicable."""
    from proofs_check.claims.scl_thread import activation_checks
    from proofs_check.core import hypothesis_fails

    cat = T.activation_category(act)
    claims = []
    for c in rep.claims:
        if cat == "positive-open" and c.name == "optimal-value":
            c.name = "infimum-value"
            c.reason = "over the closure (UFM+): " + c.reason
        elif cat == "positive-open" and c.name in ("geometry-of", "geometry-orthogonal-frame", "within-class-collapse",
                                                   "unique-minimiser"):
            c = hypothesis_fails(c.name, f"{act} features are strictly positive: the infimum is not attained, there is "
                                 "no minimiser (the OF is the limit of feasible features)")
        claims.append(c)
    if inst.full_batch:
        claims += activation_checks(act, inst.counts, inst.tau, prefix="activation-")
    else:
        rep.diagnostics.append("the activation's own statements are checked for the full batch only")
    rep.claims = claims
    rep.extra["activation"] = {"name": act, "category": cat, "model": "UFM+" if inst.nonneg else "UFM (no ReLU)"}
    return rep


# ---- batching ------------------------------------------------------------------------------

def _batching_args(p):
    p.add_argument("--counts", type=int_list, required=True, help="class sizes, e.g. 4,4")
    p.add_argument("--batches", required=True, help='mini-batches as "0,1,4,5;2,3,6,7"')
    p.add_argument("--dim", type=int, default=None, help="feature dimension (default k + 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


#: `ncproofs batching`: the C1/C2 analysis looks at every pair of classes in every batch; measured 108 s for
#: 1000 classes and 1999 batches on the 2-core machine (audit), so 300 classes keep it within seconds.
BATCHING_MAX_CLASSES = 300
#: seconds per class pair and batch of that measurement (108 s / (499500 pairs x 1999 batches)), only to state the
#: seconds here in the refusal (the decision counts classes, never a time)
BATCHING_SECONDS_PER_PAIR = 1.08e-7
#: Above this many classes the text output lists only the pairs where C2 fails (and counts the rest).
BATCHING_LIST_ALL_PAIRS = 20


def batching_report(args) -> dict:
    from theory._validate import InputError

    counts = _counts(args.counts)
    if len(counts) > BATCHING_MAX_CLASSES:
        from theory._work import rate_text

        k, kmax = len(counts), BATCHING_MAX_CLASSES
        raise InputError(f"--counts: {k} classes > {kmax}: the C1/C2 analysis checks every pair of classes in every "
                         f"batch, work {k * (k - 1) // 2} class pairs per batch (limit {kmax * (kmax - 1) // 2} class "
                         "pairs per batch, the same on every machine; "
                         f"{rate_text(k * (k - 1) / 2 * BATCHING_SECONDS_PER_PAIR)} per batch)")
    batches = T.parse_batches_text(args.batches)
    an = T.analyze_batching(counts, batches, args.dim)
    bind = T.batch_binding(counts, batches)
    an_b = T.analyze_batching(counts, bind, an.d)
    out = an.to_dict()
    out.update(binding=[list(b) for b in bind], binding_C1=an_b.C1, binding_C2=an_b.C2,
               binding_of_unique=an_b.of_unique, binding_reason=an_b.reason)
    return out


def batching_json(out: dict) -> dict:
    """The batching analysis under the keys of a solve report (``solve scl`` has the same analysis under
    ``batching``): one layout for both commands (proofs_check/envelope.py)."""
    return {"family": "scl", "instance": {"counts": out["counts"], "batches": out["batches"], "d": out["d"]},
            "predicted": {"of_unique": out["of_unique"], "binding_of_unique": out["binding_of_unique"],
                          "theorem": "Kini et al. 2024, Theorem 2: C1 and C2 make the orthogonal frame the unique "
                                     "mini-batch minimiser"},
            "solution": None, "certificate": None, "geometry": None, "routes": {}, "claims": [], "diagnostics": [],
            "verdict": None, "reason": out["reason"], "batching": out}


def run_batching(args) -> int:
    out = batching_report(args)
    if args.json:
        from proofs_check.envelope import envelope

        print(json.dumps(clean(envelope("batching", batching_json(out))), indent=2, allow_nan=False))
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
    pairs = out["C2_per_pair"]
    if k <= BATCHING_LIST_ALL_PAIRS:
        for pair, v in pairs.items():
            lines.append(f"  classes ({pair}): {'yes' if v else 'NO'}")
    else:  # k(k-1)/2 lines would bury the answer: the failing pairs only (--json has every pair)
        bad = [pair for pair, v in pairs.items() if not v]
        lines.append(f"  {len(pairs) - len(bad)} of {len(pairs)} pairs hold" + (": every pair" if not bad else
                                                                               "; failing pairs:"))
        lines += [f"  classes ({pair}): NO" for pair in bad[:200]]
        if len(bad) > 200:
            lines.append(f"  ... and {len(bad) - 200} more (see --json)")
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
    rows, reports, labels = [], [], []
    rig = bool(getattr(args, "rigorous", False))
    for counts in sets:
        for tau in args.tau:
            inst = T.SCLInstance(counts, tau, len(counts), True)  # validates counts and tau
            N = inst.N
            b = T.theorem1_bound(counts, tau)
            lim0 = float(sum(n * math.log(n - 1) for n in counts if n >= 2))
            liminf = float(sum(n * math.log(N - 1) for n in counts if n >= 2))
            rows.append([",".join(map(str, counts)), inst.tau, N, b, b / N, T.etf_value(counts, tau),
                         T.relu_cost(counts, tau), lim0, liminf])
            if rig:
                reports.append(_row_report(inst, b))
                labels.append(f"counts={','.join(map(str, counts))}, tau={inst.tau:g}")
    cols = ["counts", "tau", "N", "theorem1_bound", "bound_per_sample", "etf_value", "relu_cost",
            "bound_tau_to_0", "bound_tau_to_inf"]
    latex = ["$n_c$", r"$\tau$", "$N$", r"$\mathcal{L}^\star_{\mathrm{OF}}$", r"$\mathcal{L}^\star_{\mathrm{OF}}/N$",
             r"$\mathcal{L}_{\mathrm{ETF}}$", "ReLU cost", r"$\tau\to0^+$", r"$\tau\to\infty$"]
    caption = ("SCL lower bounds (Kini et al., ICLR 2024, Theorem 1, reconstructed) and collapsed-ETF values "
               f"(Graf et al., ICML 2021). Convention: {CONVENTION}. ReLU cost = bound - ETF value, balanced counts only "
               "(missing otherwise). Last two columns: limits of the bound as tau -> 0+ (sum n_c log(n_c - 1)) and "
               "tau -> infinity (sum n_c log(N - 1)).")
    table = Table(cols, rows, caption=caption, latex_columns=latex, meta={"family": "scl", "convention": CONVENTION})
    if rig:
        from proofs_check.tables import add_rigorous

        table = add_rigorous(table, reports, labels=labels,
                             statement="the row's value statement: theorem1_bound is the optimum of the UFM+ (unit-norm "
                                       "nonnegative features), full batch, d = k (Theorem 1: attained by the orthogonal "
                                       "frame).")
    return table


def _row_report(inst: T.SCLInstance, bound: float) -> dict:
    """The `solve scl` report of one row of `table scl` (``SolveReport.to_dict()`` form) for
    ``proofs_check.rigorous.apply``: the UFM+ full-batch instance at d = k and its value statement
    ``optimal-value`` = the Theorem 1 bound, with the family's tolerance. The table solves nothing in floats, so
    the statement's float verdict is INCONCLUSIVE; the ball-arithmetic bracket decides it."""
    from proofs_check.claims.scl import VALUE_RTOL, loss_roundoff
    from proofs_check.core import tolerance
    from proofs_check.statements import ValueEquals

    tol = tolerance(bound, rtol=VALUE_RTOL, atol=loss_roundoff(inst))
    return {"family": "scl", "instance": inst.to_dict(), "predicted": {"value": bound}, "certificate": {},
            "claims": [{"id": "optimal-value", "verdict": "INCONCLUSIVE", "independent": True,
                        "reason": "closed form only: `table scl` solves nothing in floats",
                        "evidence": {"predicted": bound, "tolerance": tol,
                                     "statement": ValueEquals(bound, tol).to_dict()}}],
            "diagnostics": []}


COMMANDS = [
    SolveCommand("scl", "supervised contrastive loss: minimise, certify and compare with Theorems 1/2 or the ETF value",
                 _solve_args, solve_scl),
    ExtraCommand("batching", "SCL batching conditions C1/C2, uniqueness of the orthogonal frame, batch-binding",
                 _batching_args, run_batching),
    TableCommand("scl", "SCL bounds per (counts, tau): Theorem 1, ETF value, ReLU cost, tau limits",
                 _table_args, rigorous_table("scl")(build_table)),
]
