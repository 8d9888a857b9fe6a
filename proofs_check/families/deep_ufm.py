"""CLI: ``ncproofs solve deep-ufm`` and ``ncproofs table deep-ufm`` (docs/deep_ufm.md). Argument parsing only."""

from __future__ import annotations

import argparse

from proofs_check.commands import (SolveCommand, TableCommand, UsageError, add_backend_arguments, backend_from_args,
                                   float_list, int_list)
from proofs_check.tables import Table

#: a table is refused above this estimated work (flop, as solvers.deep_ufm.WORK_LIMIT_FLOP): "every input ends
#: within about two minutes" on the loaded 2-core machine
TABLE_WORK_LIMIT = 4e11
#: rows of `table deep-ufm` at most (--classes x --layers x --lambda; checked before any instance is built)
TABLE_MAX_ROWS = 200


def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layers", "-L", type=int, required=True, help="number of weight layers L >= 1 (L - 1 ReLUs)")
    p.add_argument("--activation", choices=("linear", "relu"), default="linear",
                   help="between the weight layers (never on H, never after W_L); default linear")
    p.add_argument("--loss", choices=("mse", "ce"), default="mse", help="mse (mean over samples) or ce")
    p.add_argument("--classes", "-k", type=int, default=None, metavar="K", help="number of classes (with --per-class)")
    p.add_argument("--per-class", "-n", type=int, default=None, metavar="n", help="samples per class")
    p.add_argument("--counts", type=int_list, default=None, metavar="N1,N2,...", help="class sizes (imbalanced)")
    p.add_argument("--width", "-D", type=int, required=True, metavar="D", help="hidden width D (every layer)")
    p.add_argument("--lambda", dest="lam", type=float_list, required=True, metavar="LAMBDA[,...]",
                   help="one weight decay for all, or L + 1 values lambda_H,lambda_1,...,lambda_L")
    p.add_argument("--starts", type=int, default=3, help="random starts of the local solver (default 3)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--max-evals", type=int, default=3000, help="objective evaluations per start (work budget)")
    p.add_argument("--tau", type=float, default=0.1, help="CE: singular-value threshold of the rank count")
    add_backend_arguments(p)  # torch (GPU) objective for wide models; values re-judged in float64 numpy


def _counts(args) -> tuple:
    if args.counts is not None:
        if args.classes is not None or args.per_class is not None:
            raise UsageError("--counts: give either --counts or --classes with --per-class, not both")
        if len(args.counts) < 2:
            raise UsageError(f"--counts needs at least 2 classes, got {len(args.counts)}")
        if any(c < 1 for c in args.counts):
            raise UsageError("--counts must all be >= 1")
        _check_samples(sum(args.counts), "--counts")
        return tuple(args.counts)
    if args.classes is None or args.per_class is None:
        raise UsageError("give --classes K with --per-class n, or --counts N1,N2,...")
    if args.classes < 2:
        raise UsageError(f"--classes must be >= 2, got {args.classes}")
    if args.per_class < 1:
        raise UsageError(f"--per-class must be >= 1, got {args.per_class}")
    from theory.deep_ufm import MAX_CLASSES

    if args.classes > MAX_CLASSES:  # before the tuple of K class sizes is built (K = 2^63 - 1 filled the memory)
        raise UsageError(f"--classes must be <= {MAX_CLASSES}, got {args.classes}")
    _check_samples(args.classes * args.per_class, "--classes/-k x --per-class/-n")
    return (args.per_class,) * args.classes


def _check_samples(total: int, opts: str) -> None:
    """The instance's limit on the samples, named by the options that set them (it names its own ``counts``)."""
    from theory.deep_ufm import MAX_SAMPLES

    if total > MAX_SAMPLES:
        raise UsageError(f"{opts}: at most {MAX_SAMPLES} samples in total, got {total}")


def _common_checks(args) -> None:
    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1, got {args.starts}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.max_evals < 1:
        raise UsageError(f"--max-evals must be >= 1, got {args.max_evals}")
    if not args.lam:
        raise UsageError("--lambda needs at least one value")
    if not (args.tau > 0):
        raise UsageError(f"--tau must be > 0, got {args.tau}")
    from proofs_check.claims.deep_ufm import CE_TAU_RANGE as TAU_RANGE

    if not TAU_RANGE[0] <= args.tau <= TAU_RANGE[1]:  # 1e-320: the rank bound divided by 0 (internal error)
        raise UsageError(f"--tau must be in [{TAU_RANGE[0]:g}, {TAU_RANGE[1]:g}] (the singular values the float64 "
                         f"solver resolves), got {args.tau:g}")


def _solve(args: argparse.Namespace) -> dict:
    from proofs_check.claims.deep_ufm import check_instance
    from theory.deep_ufm import DeepUFMInstance

    _common_checks(args)
    inst = DeepUFMInstance(args.layers, args.activation, args.loss, _counts(args), args.width, tuple(args.lam))
    backend = backend_from_args(args)
    return check_instance(inst, starts=args.starts, seed=args.seed, max_evals=args.max_evals, tau=args.tau,
                          backend=backend).to_dict()


def _render(out: dict) -> str:
    from proofs_check.cli import render_claims

    inst = out["instance"]
    lines = [f"deep UFM: L = {inst['layers']} ({inst['activation']}, {inst['loss']}), K = {inst['classes']}, "
             f"counts {inst['counts'][:8]}{'...' if len(inst['counts']) > 8 else ''}, D = {inst['width']}, "
             f"lambda_H = {inst['lambda_H']:g}, lambda_W = {inst['lambda_W']}"]
    sol = out.get("solution") or {}
    if sol:
        lines.append(f"best point: {sol.get('value')} ({sol.get('method')})")
    cert = out.get("certificate")
    if cert:
        lines.append(f"proven lower bound: {cert['lower_bound']!r}  (rank of every minimiser: {cert.get('rank')})")
    elif out.get("family") == "deep_ufm" and inst["loss"] == "mse" and inst["activation"] == "relu":
        lines.append("proven lower bound: none (ReLU model, non-convex)")
    dnc = out.get("dnc")
    if dnc and dnc.get("enclosure"):
        lines.append(f"best DNC value in [{dnc['enclosure'][0]!r}, {dnc['enclosure'][1]!r}]")
    geo = (out.get("geometry") or {}).get("best_point")
    if geo:
        lines.append("per-layer class-mean ranks: " + ", ".join(f"{f['layer']}: {f['rank']}" for f in geo["features"]))
        for f in geo["features"]:
            nc2 = f.get("nc2_of")
            lines.append(f"  layer {f['layer']}: singular values " + ", ".join(f"{v:.4g}" for v in
                                                                             f["singular_values"][:8])
                         + (f"; NC2 (distance to OF) {nc2:.3g}" if nc2 is not None else ""))
    lines.append("")
    lines.extend(render_claims(out))
    return "\n".join(lines)


def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layers", type=int_list, default=[1, 2, 3, 4], help="comma-separated L values (default 1,2,3,4)")
    p.add_argument("--classes", type=int_list, default=[2, 3, 5], help="comma-separated K values (default 2,3,5)")
    p.add_argument("--per-class", type=int, default=1, help="samples per class (default 1)")
    p.add_argument("--width", type=int, default=None, help="hidden width (default 2K per row)")
    p.add_argument("--activation", choices=("linear", "relu"), default="relu", help="default relu")
    p.add_argument("--lambda", dest="lam", type=float_list, default=[0.004], help="comma-separated weight decays")
    p.add_argument("--starts", type=int, default=2, help="random starts per row (ReLU; default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-evals", type=int, default=1500, help="evaluations per start (default 1500)")


def _table(args: argparse.Namespace) -> Table:
    from proofs_check.claims.deep_ufm import check_instance
    from solvers import deep_ufm as S
    from theory.deep_ufm import DeepUFMInstance

    for opt, val in (("--layers", args.layers), ("--classes", args.classes), ("--lambda", args.lam)):
        if not val:
            raise UsageError(f"{opt} needs at least one value")
    if any(L < 1 or L > 12 for L in args.layers):
        raise UsageError("--layers: every L must be in [1, 12]")
    if any(K < 2 or K > 100 for K in args.classes):
        raise UsageError("--classes: every K must be in [2, 100] for the table")
    _check_samples(max(args.classes) * args.per_class if args.per_class >= 1 else 0, "--classes x --per-class")
    if args.per_class < 1 or args.starts < 1 or args.seed < 0 or args.max_evals < 1:
        raise UsageError("--per-class, --starts and --max-evals must be >= 1 and --seed >= 0")
    if args.width is not None and args.width < 1:
        raise UsageError(f"--width must be >= 1, got {args.width}")
    rows = len(args.classes) * len(args.layers) * len(args.lam)
    if rows > TABLE_MAX_ROWS:  # before any instance is built (5000 --layers entries ran for minutes)
        raise UsageError(f"--classes x --layers x --lambda: the table has {rows} rows, more than the limit "
                         f"{TABLE_MAX_ROWS}")
    insts = []
    work = 0.0
    for K in args.classes:
        for L in args.layers:
            for lam in args.lam:
                inst = DeepUFMInstance(L, args.activation, "mse", (args.per_class,) * K,
                                       args.width or 2 * K, (lam,))
                insts.append(inst)
                work += S.estimate_work(S.DeepModel(inst, collapsed=True), args.starts + 1, args.max_evals)
    if work > TABLE_WORK_LIMIT:
        raise UsageError(f"table deep-ufm: {rows} rows x (--starts + 1) x --max-evals evaluations: "
                         f"{S.work_text(work, TABLE_WORK_LIMIT)}; fewer rows, --starts or --max-evals")
    rows = []
    for inst in insts:
        rep = check_instance(inst, starts=args.starts, seed=args.seed, max_evals=args.max_evals, symbolic=False)
        d = rep.to_dict()
        dnc = (d.get("dnc") or {}).get("enclosure")
        cert = d.get("certificate")
        geo = (d.get("geometry") or {}).get("best_point")
        rank = None
        if cert and cert.get("rank") is not None:
            rank = cert["rank"]
        elif geo:  # ReLU: the lowest class-mean rank over the layers (where the low-rank bias shows)
            rank = min(f["rank"] for f in geo["features"])
        verdict = {c["id"]: c["verdict"] for c in d["claims"]}.get("dnc-optimal", "n/a")
        rows.append([inst.layers, inst.K, inst.width, inst.lams[0], dnc[0] if dnc else None,
                     (d.get("solution") or {}).get("value"), cert["lower_bound"] if cert else None, rank,
                     verdict, {"VERIFIED": "yes" if rep.predicted.get("dnc_optimal") else "no",
                               "REFUTED": "no" if rep.predicted.get("dnc_optimal") else "yes"}.get(verdict, "?")])
    cols = ["L", "K", "D", "lambda", "dnc_value", "best_value", "proven_lower", "rank", "dnc_verdict", "dnc_optimal"]
    latex = ["$L$", "$K$", "$D$", r"$\lambda$", "best DNC", "best found", "proven lower", "rank",
             "verdict", "DNC optimal?"]
    cap = (f"Deep UFM, {args.activation}, MSE (mean over samples, no bias, n = {args.per_class} per class, all weight "
           f"decays equal): the best DNC value (lower end of its proven enclosure), the best value found "
           f"({args.starts} starts + the perturbed DNC point, {args.max_evals} evaluations each; exact for ReLU), a "
           f"proven lower bound (deep linear only), the rank of the best point (deep linear: of the product, proven; "
           f"ReLU: the lowest class-mean rank over the layers, singular values above 1e-2 of the largest), the verdict of "
           f"the literature's 'DNC is optimal' statement and whether DNC is optimal (yes/no decided by a proof or a "
           f"witness, ? undecided). docs/deep_ufm.md.")
    # the proven lower bound is printed rounded down (md/LaTeX: it stays a lower bound); csv/json keep the doubles
    return Table(cols, rows, cap, latex_columns=latex, digits=6, latex_caption=None,
                 rounding={"proven_lower": "down"})


COMMANDS = [
    SolveCommand("deep-ufm", "deep unconstrained features model: certified deep linear optimum, DNC versus "
                 "lower-rank points (ReLU), CE low-rank bias", _solve_args, _solve, _render),
    TableCommand("deep-ufm", "best DNC value, best value found, proven lower bound, rank per (L, K, lambda)",
                 _table_args, _table),
]
