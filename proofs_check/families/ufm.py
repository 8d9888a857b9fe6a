"""CLI: ``ncproofs solve ufm-ce|ufm-mse`` and ``ncproofs table ufm``."""

from __future__ import annotations

import argparse

from proofs_check.commands import (SolveCommand, TableCommand, UsageError, add_backend_arguments, backend_from_args,
                                   float_list, int_list)
from proofs_check.tables import Table, rigorous_table
from theory import ufm as T
from theory._validate import TEXT_BLANKS, InputError, float_from_text

#: --starts of every ufm command at most (the work estimates count flops, not the Python overhead of a start:
#: ufm-mse --starts 100000000 fitted the flop budget and ran for hours)
MAX_STARTS = 1000


def _common(p: argparse.ArgumentParser, *, bias: bool) -> None:
    p.add_argument("--classes", "-k", type=int, required=True, metavar="K", help="number of classes k >= 2")
    p.add_argument("--per-class", "-n", type=int, required=True, metavar="n", help="samples per class n >= 1")
    p.add_argument("--dim", "-d", type=int, required=True, metavar="d", help="feature dimension d >= 1")
    p.add_argument("--lambda-w", type=float, required=True, metavar="LW", help="weight decay on W (> 0)")
    p.add_argument("--lambda-h", type=float, required=True, metavar="LH", help="weight decay on H (> 0)")
    p.add_argument("--lambda-b", type=float, default=None, metavar="LB",
                   help="weight decay on the bias (>= 0, default 0)" if bias else argparse.SUPPRESS)
    p.add_argument("--method", choices=("auto", "closed-form", "convex", "factored"), default="auto",
                   help="auto: every route that applies at this size (default)")
    p.add_argument("--starts", type=int, default=None,
                   help="random starts of the factored solver (default 3; refused with --method closed-form or "
                        "convex, which run no factored solve)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--max-memory", type=_bytes, default=None, metavar="BYTES",
                   help="memory budget, e.g. 4G or 500M (default: min(0.8 x available memory, 2.5G)); routes whose "
                        "size estimate exceeds it are refused (or skipped by --method auto)")
    add_backend_arguments(p)


def _bytes(text: str) -> float:
    """Parse 4G, 500M, 2.5e9 (argparse type)."""
    t = text.strip(TEXT_BLANKS).upper().removesuffix("B")
    mult = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(t[-1:], 1.0)
    try:
        v = float_from_text(t[:-1] if mult != 1.0 else t) * mult  # the shared syntax (no 1_0G, no other digits)
    except InputError:
        raise argparse.ArgumentTypeError(f"expected a size like 4G, 500M or 2.5e9, got {text!r}") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive finite size, got {text!r}")
    return v


def _run(loss: str):
    def run(args: argparse.Namespace):
        """The live ``SolveReport`` of ``check_instance`` (``solve --rigorous`` bounds its instance as it is)."""
        from proofs_check.claims.ufm import check_instance

        if loss == "mse" and args.lambda_b is not None:
            raise UsageError("--lambda-b is not accepted for ufm-mse: the MSE closed form assumes an unregularized bias")
        starts = getattr(args, "starts", None)
        if starts is not None and args.method in ("closed-form", "convex"):
            raise UsageError(f"--starts needs --method auto or factored (the factored solver's random starts); "
                             f"--method {args.method} runs no factored solve")
        starts = 3 if starts is None else starts
        if not 1 <= starts <= MAX_STARTS:  # the work estimate counts flops, not the per-start overhead
            raise UsageError(f"--starts must be in [1, {MAX_STARTS}], got {starts}")
        if args.seed < 0:
            raise UsageError(f"--seed must be >= 0, got {args.seed}")
        inst = T.UFMInstance(loss, args.classes, args.per_class, args.dim, args.lambda_w, args.lambda_h,
                             args.lambda_b if args.lambda_b is not None else 0.0)
        backend = backend_from_args(args)
        return check_instance(inst, method=args.method, starts=starts, seed=args.seed,
                              max_memory=args.max_memory, **backend)

    return run


def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loss", choices=("ce", "mse", "ls", "weighted-ce"), default="ce",
                   help="ce, mse, ls (label smoothing, needs --smoothing) or weighted-ce (needs --class-weights)")
    p.add_argument("--smoothing", type=float_list, default=None, metavar="EPS,...",
                   help="label smoothing eps values in [0, 1) (--loss ls)")
    p.add_argument("--smoothing-convention", choices=("torch", "others"), default="torch",
                   help="torch: (1-eps) e_y + eps/K (PyTorch label_smoothing, default); others: eps/(K-1) off-label")
    p.add_argument("--class-weights", type=float_list, default=None, metavar="W1,W2,...",
                   help="class weights (--loss weighted-ce), one per class")
    p.add_argument("--classes", type=int_list, default=None,
                   help="comma-separated k values (balanced, with --per-class; or the K of --profile); "
                        "default 3,5,10 when neither --counts nor --profile is given")
    p.add_argument("--per-class", type=int_list, default=None, help="comma-separated n values (default 2)")
    p.add_argument("--counts", type=int_list, action="append", default=None, metavar="N1,N2,...",
                   help="class sizes of one imbalanced instance, e.g. 6,6,2,1 (repeatable)")
    p.add_argument("--profile", choices=("step", "longtail"), default=None,
                   help="generate counts from an imbalance profile (as `table scl`): step or longtail")
    p.add_argument("--majority", type=int, default=None, help="profile: majority class size")
    p.add_argument("--ratio", type=float_list, default=None, metavar="R,...", help="profile: imbalance ratios R >= 1")
    p.add_argument("--step-fraction", type=float, default=0.5, help="step profile: fraction of majority classes")
    p.add_argument("--lambda", dest="lam", type=float_list, default=None,
                   help="comma-separated lw = lh values (default 1e-3,1e-2,1e-1)")
    p.add_argument("--lambda-w", type=float_list, default=None, metavar="LW,...",
                   help="comma-separated lw values (with --lambda-h; every pair is a row)")
    p.add_argument("--lambda-h", type=float_list, default=None, metavar="LH,...", help="comma-separated lh values")
    p.add_argument("--starts", type=int, default=1, help="random starts of the solver where there is no closed form")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def _nonempty(option: str, values, what: str = "value") -> list:
    """A list option of ``table ufm`` must hold at least one entry: '' and ',,,' parse to [] (one line, exit 2)."""
    if values is not None and len(values) == 0:
        raise UsageError(f"{option} needs at least one {what} (comma-separated), got none")
    return values


def _counts_text(counts) -> str:
    if len(counts) <= 8:
        return ",".join(map(str, counts))
    return f"{max(counts)}..{min(counts)} ({len(set(counts))} distinct)"


def _profile_counts(SCLT, profile: str, k: int, majority: int, R: float, rho: float):
    """Counts of a profile, through theory.scl's generators (the same as `table scl`)."""
    if profile == "step":
        return SCLT.step_counts(k, majority, R, rho), f"step R={R:g} rho={rho:g}"
    return SCLT.longtail_counts(k, majority, R), f"longtail R={R:g}"


def _table_instances(args: argparse.Namespace) -> tuple[list[tuple], bool]:
    """The count vectors of the rows: [(label, counts, n or None)], and whether they are balanced (k x n)."""
    from theory import scl as SCLT

    for opt, val, what in (("--classes", args.classes, "number of classes k"),
                           ("--per-class", args.per_class, "sample count n"),
                           ("--lambda", args.lam, "weight decay"), ("--lambda-w", args.lambda_w, "weight decay"),
                           ("--lambda-h", args.lambda_h, "weight decay"), ("--ratio", args.ratio, "ratio R"),
                           ("--smoothing", args.smoothing, "eps"), ("--class-weights", args.class_weights, "weight")):
        _nonempty(opt, val, what)
    for c in args.counts or []:
        _nonempty("--counts", c, "class size")
    if args.profile is None:
        for opt in ("majority", "ratio"):
            if getattr(args, opt) is not None:
                raise UsageError(f"--{opt} needs --profile step|longtail")
    if args.counts is not None or args.profile is not None:
        if args.per_class is not None:
            raise UsageError("--per-class is for balanced tables: not with --counts or --profile")
        sets = []
        for c in args.counts or []:
            if len(c) < 2:
                raise UsageError(f"--counts needs at least 2 classes, got {','.join(map(str, c))}")
            if any(x < 1 for x in c):
                raise UsageError(f"--counts must all be >= 1, got {','.join(map(str, c))}")
            sets.append((_counts_text(c), tuple(c), None))
        if args.profile is not None:
            missing = [n for n in ("classes", "majority", "ratio") if getattr(args, n) is None]
            if missing:
                raise UsageError(f"--profile {args.profile} needs --{' --'.join(m.replace('_', '-') for m in missing)}")
            for k in args.classes:
                for R in args.ratio:
                    try:
                        c, label = _profile_counts(SCLT, args.profile, k, args.majority, R, args.step_fraction)
                    except InputError as exc:
                        raise UsageError(f"--profile {args.profile} (--classes {k} --majority {args.majority} "
                                         f"--ratio {R:g}): {exc}") from None
                    sets.append((f"{label}: {_counts_text(c)}", c, None))
        elif args.classes is not None:
            raise UsageError("--classes with --counts: the counts already give the classes (or use --profile)")
        return sets, False
    classes = args.classes if args.classes is not None else [3, 5, 10]
    per = args.per_class if args.per_class is not None else [2]
    for k in classes:
        if not 2 <= k <= 10_000:
            raise UsageError(f"--classes: k must be in [2, 10000], got {k}")
    for n in per:
        if n < 1:
            raise UsageError(f"--per-class: n must be >= 1, got {n}")
    return [(None, (n,) * k, n) for k in classes for n in per], True


def _lambda_pairs(args: argparse.Namespace) -> tuple[list[tuple[float, float]], bool]:
    if args.lam is not None and (args.lambda_w is not None or args.lambda_h is not None):
        raise UsageError("give --lambda (lw = lh) or --lambda-w with --lambda-h, not both")
    if (args.lambda_w is None) != (args.lambda_h is None):
        raise UsageError("--lambda-w and --lambda-h go together (every pair is a row); --lambda sets lw = lh")
    if args.lambda_w is not None:
        pairs = [(lw, lh) for lw in args.lambda_w for lh in args.lambda_h]
        same = False
    else:
        pairs = [(x, x) for x in (args.lam if args.lam is not None else [1e-3, 1e-2, 1e-1])]
        same = True
    for lw, lh in pairs:
        for name, v in (("--lambda" if same else "--lambda-w", lw), ("--lambda" if same else "--lambda-h", lh)):
            if not (v == v and 1e-12 <= v <= 1e12):
                raise UsageError(f"{name}: weight decays must be in [1e-12, 1e12] (docs/ufm.md), got {v:g}")
    return pairs, same


#: the whole table is refused above this estimated time (seconds, 2-core machine): "every input ends within
#: 2 minutes" (docs/DEVELOPING.md)
TABLE_TIME_LIMIT_S = 100.0


#: rows of `table ufm` at most (a closed-form row costs ~1-8 ms with its certificate, 5000 rows of k = 2..5001 took
#: 30 s under load; the flop budget below counts only the rows without one): --classes 2..301 x --per-class 1..300
#: (90000 rows) or 3000 x 3000 --lambda-w x --lambda-h pairs ran for minutes
TABLE_MAX_ROWS = 2000


def _table_row_count(args: argparse.Namespace) -> int:
    """The rows the options ask for, from their lengths alone (before any instance is built)."""
    n = lambda v, default: len(v) if v is not None else default  # noqa: E731
    if args.counts is not None or args.profile is not None:
        sets = n(args.counts, 0) + (n(args.classes, 0) * n(args.ratio, 0) if args.profile is not None else 0)
    else:
        sets = n(args.classes, 3) * n(args.per_class, 1)
    pairs = n(args.lambda_w, 0) * n(args.lambda_h, 0) if args.lambda_w is not None else n(args.lam, 3)
    return sets * max(pairs, 1) * n(args.smoothing, 1)


def _table(args: argparse.Namespace) -> Table:
    from proofs_check.claims.ufm import certify_value, estimate_value
    from solvers import losses as L
    from solvers import ufm_general as SG

    rows = _table_row_count(args)
    if rows > TABLE_MAX_ROWS:
        raise UsageError(f"--classes/--per-class/--counts/--ratio x --lambda (or --lambda-w x --lambda-h) x "
                         f"--smoothing: the table has {rows} rows, more than the limit {TABLE_MAX_ROWS}")
    sets, balanced = _table_instances(args)
    pairs, same = _lambda_pairs(args)
    if not 1 <= args.starts <= MAX_STARTS or args.seed < 0:
        raise UsageError(f"--starts must be in [1, {MAX_STARTS}] and --seed >= 0, got --starts {args.starts}")
    if args.loss == "ls" and args.smoothing is None:
        raise UsageError("--loss ls needs --smoothing EPS[,EPS...]")
    if args.smoothing is not None and args.loss not in ("ls", "weighted-ce"):
        raise UsageError("--smoothing applies to --loss ls (or weighted-ce)")
    if args.class_weights is not None and args.loss != "weighted-ce":
        raise UsageError("--class-weights applies to --loss weighted-ce")
    epss = args.smoothing if args.smoothing is not None else [0.0]
    problems = []
    for label, counts, n in sets:
        K = len(counts)
        if args.class_weights is not None and len(args.class_weights) != K:
            raise UsageError(f"--class-weights has {len(args.class_weights)} entries, but an instance has {K} classes")
        for eps in epss:
            loss = loss_from_options(args.loss, K, smoothing=eps, convention=args.smoothing_convention,
                                     weights=args.class_weights)
            for lw, lh in pairs:
                problems.append((label, counts, n, eps, lw, lh, SG.classification(loss, list(counts), K, lw, lh)))
    rig = bool(getattr(args, "rigorous", False))
    total = sum(estimate_value(pr[-1], args.starts) for pr in problems)
    if total > TABLE_TIME_LIMIT_S:
        from solvers.common import work_text

        raise UsageError(f"table ufm: too large: the rows without a closed form need "
                         f"{work_text(total, TABLE_TIME_LIMIT_S)}; use fewer rows, classes or distinct counts")
    imbalanced = not balanced
    ls = args.loss == "ls"
    cols, latex = (["k", "n"], ["$k$", "$n$"]) if balanced else (["counts", "k", "N"], ["counts $n_c$", "$k$", "$N$"])
    cols += ["lambda"] if same else ["lambda_w", "lambda_h"]
    latex += [r"$\lambda$"] if same else [r"$\lambda_W$", r"$\lambda_H$"]
    if ls:
        cols.append("eps")
        latex.append(r"$\varepsilon$")
    cols += ["f*", "lower_bound", "gap", "certified"]
    latex += [r"$f^\star$", "lower bound", "gap", "certified"]
    if balanced:
        margin = "singular value z" if args.loss == "mse" else "optimal logit margin c*"
        cols += ["closed_form", margin, "phase"]
        latex += ["closed form", "$z$" if args.loss == "mse" else r"$c^\star$", "phase"]
    if imbalanced:
        cols += ["minority_classifier_cosine", "classifier_norm_ratio"]
        latex += ["minority $\\cos$", "norm ratio"]
    rows, reports, labels = [], [], []
    for label, counts, n, eps, lw, lh, p in problems:
        # work budgets (evaluations), not wall time: the same table at any machine load (docs/ufm_general.md,
        # "Budgets"); a row whose solve spends its budget keeps its best point and its certificate decides
        r = certify_value(p, starts=args.starts, seed=args.seed)
        row = [len(counts), n] if balanced else [label, len(counts), int(sum(counts))]
        row += [lw] if same else [lw, lh]
        if ls:
            row.append(eps)
        row += [r["value"], r["lower_bound"], r["gap"], bool(r["certified"])]
        if balanced:
            row += [r["closed_form"], r["margin"], r["phase"]]
        if imbalanced:
            row += [r.get("minority_classifier_cosine"), r.get("classifier_norm_ratio")]
        rows.append(row)
        if rig:
            reports.append(_row_report(p, r))
            labels.append(", ".join(f"{c}={v:g}" if isinstance(v, float) else f"{c}={v}" for c, v in zip(cols, row)
                                    if c in ("counts", "k", "n", "lambda", "lambda_w", "lambda_h", "eps")))
    loss_txt = {"ce": "cross-entropy", "mse": "MSE (1/2)||z - e_y||^2", "ls": f"label smoothing ({args.smoothing_convention} "
                "convention)", "weighted-ce": "class-weighted cross-entropy (1/N mean)"}[args.loss]
    loss_tex = {"ce": "cross-entropy", "mse": r"MSE $\frac12\|z - e_y\|^2$",
                "ls": f"label smoothing ({args.smoothing_convention} convention)",
                "weighted-ce": r"class-weighted cross-entropy ($\frac1N$ mean)"}[args.loss]
    lam_txt = "lw = lh = lambda" if same else "lw, lh"
    cap = (f"UFM optimal values, loss {loss_txt}: f = (1/N) sum_i loss(W h_i + b, y_i) + lw/2||W||^2 + lh/2||H||^2, "
           f"unregularized bias, {lam_txt}, d = k (>= the rank of the optimum). f* is the objective at an explicit "
           "feasible point (an upper bound); lower_bound is proven by the Fenchel dual certificate "
           "(docs/ufm_general.md); gap = f* - lower_bound; certified: the gap is within the relative tolerance "
           "1e-8" + (" and the balanced closed form lies in the bracket" if balanced else "")
           + (". Imbalanced: mean cosine between the classifiers of the smallest-count classes and the ratio of "
              "their mean classifier norm to that of the largest-count classes, measured at the certified point "
              "(not a statement about every minimiser)" if imbalanced else "") + ".")
    lam_tex = r"$\lambda_W = \lambda_H = \lambda$" if same else r"$\lambda_W, \lambda_H$"
    latex_cap = (f"UFM optimal values, loss {loss_tex}: $f = \\frac1N\\sum_i \\ell(W h_i + b, y_i) + "
                 r"\frac{\lambda_W}{2}\|W\|_F^2 + \frac{\lambda_H}{2}\|H\|_F^2$, unregularized bias, " + lam_tex
                 + r", $d = k$ ($\ge$ the rank of the optimum). $f^\star$: objective at an explicit feasible point (an "
                 "upper bound); lower bound: proven by the Fenchel dual certificate (docs/ufm\\_general.md); gap $= "
                 r"f^\star - $ lower bound; certified: gap within the relative tolerance $10^{-8}$"
                 + (" and the balanced closed form inside the bracket" if balanced else "")
                 + (". Imbalanced: mean cosine between the classifiers of the smallest-count classes and the ratio of "
                    "their mean classifier norm to that of the largest-count classes, measured at the certified point "
                    "(not a statement about every minimiser)" if imbalanced else "") + ".")
    # the proven lower bound is printed rounded down (md/LaTeX at --precision: it stays a lower bound of the
    # optimum; rounded to nearest, 1.09861 printed 1.10 > the optimum); csv/json keep the doubles
    table = Table(cols, rows, cap, latex_columns=latex, latex_caption=latex_cap,
                  meta={"family": "ufm", "loss": args.loss}, rounding={"lower_bound": "down"})
    if rig:
        from proofs_check.tables import add_rigorous

        # every row (each recipe has its own size limits); the wall clock is only add_rigorous's safety net
        table = add_rigorous(table, reports, labels=labels)
    return table


def _row_report(p, r: dict):
    """The live `solve ufm` report of one row of `table ufm` for ``proofs_check.rigorous.apply``: the instance,
    the row's value statement ``optimal-value`` with its prediction (the balanced closed form, else the certified
    feasible value), its tolerance and float verdict, and the candidate ``certify_value`` certified
    (``r["live"]``: the ball recipe bounds that point, no second solve)."""
    from proofs_check.core import Check, SolveReport, Verdict
    from proofs_check.statements import ValueEquals

    pred = r["closed_form"] if r.get("closed_form") is not None else r["value"]
    how = "closed form" if r.get("closed_form") is not None else "certified value (no closed form)"
    chk = Check("optimal-value", Verdict(r["verdict"]), r["reason"],
                {"predicted": pred, "tolerance": r["tolerance"], "prediction": how, "attained": r["value"],
                 "lower_bound": r["lower_bound"]}, True, statement=ValueEquals(pred, r["tolerance"]))
    return SolveReport("ufm", p.to_dict(), {"value": pred},
                       certificate={"lower_bound": r["lower_bound"], "upper": r["value"], "gap": r["gap"],
                                    "method": r.get("certificate")},
                       claims=[chk], live=dict(r.get("live") or {}))


def _counts_arg(text: str) -> list[int]:
    """Parse --counts 6,6,2,1 (argparse type); values are validated by the instance (>= 1)."""
    vals = int_list(text)  # the shared syntax: ASCII integers, no empty entry ("2,,3", "2,")
    if len(vals) < 2:
        raise argparse.ArgumentTypeError(f"--counts needs at least 2 classes, got {text!r}")
    return vals


def _general_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loss", choices=("ce", "mse", "ls", "weighted-ce"), default="ce",
                   help="ce, mse, ls (label smoothing) or weighted-ce (default ce)")
    p.add_argument("--smoothing", type=float, default=None, metavar="EPS", help="label smoothing eps in [0, 1)")
    p.add_argument("--smoothing-convention", choices=("torch", "others"), default="torch",
                   help="torch: (1-eps) e_y + eps/K (PyTorch label_smoothing, default); others: eps/(K-1) off-label")
    p.add_argument("--class-weights", type=float_list, default=None, metavar="W1,W2,...",
                   help="class weights (weighted-ce); the objective keeps the 1/N mean")
    p.add_argument("--counts", type=_counts_arg, default=None, metavar="N1,N2,...", help="samples per class")
    p.add_argument("--classes", "-k", type=int, default=None, metavar="K", help="number of classes (with --per-class)")
    p.add_argument("--per-class", "-n", type=int, default=None, metavar="n", help="samples per class (balanced)")
    p.add_argument("--dim", "-d", type=int, required=True, metavar="d", help="feature dimension d >= 1")
    p.add_argument("--lambda-w", type=float, required=True, metavar="LW", help="weight decay on W (> 0)")
    p.add_argument("--lambda-h", type=float, required=True, metavar="LH", help="weight decay on H (> 0)")
    p.add_argument("--lambda-b", type=float, default=0.0, metavar="LB", help="weight decay on the bias (default 0)")
    p.add_argument("--method", choices=("auto", "factored"), default="auto",
                   help="auto/factored: class-reduced factored solve + dual certificate")
    p.add_argument("--starts", type=int, default=2, help="random starts (default 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--claim-value", type=float, default=None, metavar="F",
                   help="a claimed optimal value to check (VERIFIED / REFUTED / INCONCLUSIVE)")
    p.add_argument("--nonneg-features", action="store_true",
                   help="features constrained to H >= 0 (post-ReLU), no bias: best point of several starts, a proven "
                        "lower bound from the doubly nonnegative relaxation (ce, ls, weighted-ce; docs/ufm_general.md)")


#: the wording of ``solvers.losses`` refusals (API parameters) -> the options as the user typed them
_LOSS_OPTIONS = (("class weights ", "--class-weights "), ("smoothing eps ", "--smoothing "))


def loss_from_options(name: str, K: int, *, smoothing: float, convention: str, weights):
    """``solvers.losses.make_loss`` for the ``--loss/--smoothing/--class-weights`` options: a refusal names the
    option as typed (``--class-weights must be finite and > 0``), not the API's wording ("class weights")."""
    from solvers import losses as L

    try:
        return L.make_loss(name, K, smoothing=smoothing, convention=convention, weights=weights)
    except InputError as exc:
        msg = str(exc)
        for api, option in _LOSS_OPTIONS:
            if msg.startswith(api):
                raise UsageError(option + msg[len(api):]) from None
        raise


def general_problem(args: argparse.Namespace):
    """The instance of `solve ufm` from parsed arguments (InputError / UsageError on bad input)."""
    from solvers import losses as L
    from solvers import ufm_general as SG

    if args.counts is not None:
        if args.classes is not None or args.per_class is not None:
            raise UsageError("give either --counts or --classes with --per-class, not both")
        counts = list(args.counts)
    else:
        if args.classes is None or args.per_class is None:
            raise UsageError("give --counts N1,N2,... or --classes K with --per-class n")
        if args.classes < 2 or args.per_class < 1:
            raise UsageError(f"--classes must be >= 2 and --per-class >= 1, got {args.classes}, {args.per_class}")
        if args.classes > 10_000:
            raise UsageError(f"--classes must be <= 10000, got {args.classes}")
        counts = [args.per_class] * args.classes
    if any(c < 1 for c in counts):
        raise UsageError(f"--counts must all be >= 1 (a class with 0 samples has no loss term), got {counts}")
    if not 1 <= args.starts <= MAX_STARTS or args.seed < 0:
        raise UsageError(f"--starts must be in [1, {MAX_STARTS}] and --seed >= 0, got --starts {args.starts}")
    K = len(counts)
    eps = 0.0 if args.smoothing is None else args.smoothing
    if args.loss == "ls" and args.smoothing is None:
        raise UsageError("--loss ls needs --smoothing EPS")
    if args.smoothing is not None and args.loss not in ("ls", "weighted-ce"):
        raise UsageError("--smoothing applies to --loss ls (or weighted-ce)")
    loss = loss_from_options(args.loss, K, smoothing=eps, convention=args.smoothing_convention,
                             weights=args.class_weights)
    return SG.classification(loss, counts, args.dim, args.lambda_w, args.lambda_h, args.lambda_b or 0.0)


def _run_general(args: argparse.Namespace):
    """The live ``SolveReport`` of ``check_general`` (or ``check_nonneg``): ``solve ufm --rigorous`` bounds the
    candidate it holds."""
    from proofs_check.claims.ufm import check_general

    if getattr(args, "nonneg_features", False):
        from proofs_check.claims.ufm_relu import check_nonneg

        if args.loss == "mse":
            raise UsageError("--nonneg-features supports --loss ce, ls or weighted-ce")
        if args.lambda_b:
            raise UsageError("--lambda-b: the nonnegative-feature model has no bias term")
        return check_nonneg(general_problem(args), starts=max(args.starts, 3), seed=args.seed,
                            claimed_value=args.claim_value)
    try:
        return check_general(general_problem(args), starts=args.starts, seed=args.seed,
                             claimed_value=args.claim_value)
    except InputError as exc:  # the engine's budget refusal named no option (--starts 1000 at k = 3)
        if not str(exc).startswith("instance too large"):
            raise
        raise UsageError(f"{exc}; reduce --starts ({args.starts}) or the sizes (--counts, --classes, --per-class, "
                         "--dim)") from None


def _regression_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", required=True, metavar="Y.npy", help="targets, shape (N, m): one row per sample")
    p.add_argument("--dim", "-d", type=int, required=True, metavar="d", help="feature dimension d >= 1")
    p.add_argument("--lambda-w", type=float, required=True, metavar="LW", help="weight decay on W (> 0)")
    p.add_argument("--lambda-h", type=float, required=True, metavar="LH", help="weight decay on H (> 0)")
    p.add_argument("--claim-value", type=float, default=None, metavar="F", help="a claimed optimal value to check")
    p.add_argument("--seed", type=int, default=0, help="random seed of the factored route (default 0)")


def load_targets(path: str):
    """The targets array of ``--targets``: the .npy header is read first (shape, dtype, file size), so a file
    whose header announces more than ``MAX_TARGET_ENTRIES`` entries, or more bytes than it holds, is refused
    before anything is loaded (an audit saw 2.45 GB read for a header the size check then refused)."""
    import os

    import numpy as np

    from proofs_check.claims.ufm import MAX_TARGET_ENTRIES
    from theory._validate import input_file

    path = input_file("--targets", path)  # a FIFO or a device would block: refused from os.stat
    try:
        with open(path, "rb") as f:
            try:
                version = np.lib.format.read_magic(f)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read(f)
            except (ValueError, OSError, EOFError) as exc:
                raise UsageError(f"--targets: {path} is not a valid .npy file "
                                 f"({' '.join(str(exc).split())[:160]})") from None
            offset = f.tell()
        entries = int(np.prod(shape, dtype=object)) if shape else 1
        if entries > MAX_TARGET_ENTRIES:
            raise UsageError(f"--targets: {path} announces {entries} entries (shape {tuple(shape)}) > "
                             f"{MAX_TARGET_ENTRIES} (budget of the certificate's SVD)")
        if dtype.hasobject:
            raise UsageError(f"--targets: {path} holds Python objects ({dtype}), not numbers")
        need = offset + entries * dtype.itemsize
        size = os.path.getsize(path)
        if size < need:
            raise UsageError(f"--targets: {path} is truncated ({size} bytes, the header announces {need})")
    except FileNotFoundError:
        raise UsageError(f"--targets: file not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"--targets: {path} is a directory, not a .npy file") from None
    except PermissionError as exc:
        raise UsageError(f"--targets: cannot read {path} ({exc.strerror})") from None
    try:
        Y = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"--targets: file not found: {path}") from None
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"--targets: cannot read {path} as a .npy array ({type(exc).__name__}: {exc})") from None
    if not isinstance(Y, np.ndarray):
        raise UsageError(f"--targets: {path} does not hold a single array")
    return Y


def _run_regression(args: argparse.Namespace):
    from proofs_check.claims.ufm import check_regression

    import os

    # the absolute path and (inside check_regression) the sha256 let `--rigorous` re-read the targets
    return check_regression(load_targets(args.targets), args.dim, args.lambda_w, args.lambda_h,
                            claimed_value=args.claim_value, seed=args.seed,
                            targets_path=os.path.abspath(args.targets))


COMMANDS = [
    SolveCommand("ufm-ce", "cross-entropy UFM with weight decay (Zhu et al. 2021)", lambda p: _common(p, bias=True),
                 _run("ce")),
    SolveCommand("ufm-mse", "MSE UFM with weight decay, unregularized bias (Zhou et al. 2022)",
                 lambda p: _common(p, bias=False), _run("mse")),
    SolveCommand("ufm", "UFM with any loss (ce, mse, ls, weighted-ce) and any class counts, certified "
                 "(docs/ufm_general.md)", _general_args, _run_general),
    SolveCommand("ufm-regression", "neural regression collapse UFM (Andriopoulos et al. 2024), certified",
                 _regression_args, _run_regression),
    TableCommand("ufm", "certified optimal values of the UFM (any loss, balanced or imbalanced counts) over a grid",
                 _table_args, rigorous_table("ufm")(_table)),
]


# ---- sweeps: `family = "ufm"` in a sweep config ------------------------------------------------

def _sweep_ufm_report(params: dict, seed: int):
    """The live `solve ufm-ce|ufm-mse` report (``SolveReport``) of one sweep instance."""
    from proofs_check.claims.ufm import check_instance

    inst = T.UFMInstance(params["loss"], params["k"], params["n"], params["d"], params["lw"], params["lh"],
                         params.get("lb", 0.0))
    return check_instance(inst, method=params.get("method", "auto"), starts=int(params.get("starts", 2)),
                          seed=seed)


def _sweep_ufm(params: dict, seed: int) -> dict:
    return _sweep_ufm_result(_sweep_ufm_report(params, seed).to_dict())


def _sweep_ufm_result(out: dict) -> dict:
    """The stored result of one sweep instance from its report (plain, or judged by proofs_check.rigorous)."""
    cert = out["certificate"] or {}
    return {"verdict": out["verdict"], "reason": out["reason"], "predicted": out["predicted"]["value"],
            "attained": (out["solution"] or {}).get("value"), "lower_bound": cert.get("lower_bound"),
            "gap": cert.get("gap"), "classification": (out["geometry"] or {}).get("classification"),
            "NC1": ((out["geometry"] or {}).get("metrics") or {}).get("NC1")}


def _sweep_validate(params: dict) -> None:
    T.UFMInstance(params["loss"], params["k"], params["n"], params["d"], params["lw"], params["lh"],
                  params.get("lb", 0.0))
    if params.get("method", "auto") not in ("auto", "closed-form", "convex", "factored"):
        raise InputError(f"method must be auto, closed-form, convex or factored, got {params['method']!r}")
    starts = params.get("starts", 2)  # 'x' was an ERROR per instance, 2.5 and true ran as 2 and 1, 0 INCONCLUSIVE
    if isinstance(starts, bool) or not isinstance(starts, int) or not 1 <= starts <= MAX_STARTS:
        raise InputError(f"starts must be an integer in [1, {MAX_STARTS}] (as solve's --starts), got {starts!r}")


try:
    from proofs_check.sweep import register_sweepable

    register_sweepable("ufm", _sweep_ufm, parameters=("loss", "k", "n", "d", "lw", "lh", "lb", "method", "starts"),
                       defaults={"loss": "ce", "lb": 0.0, "method": "auto", "starts": 2}, validate=_sweep_validate,
                       version="1", description="classic UFM instance: closed form vs certificate vs solvers",
                       replace=True, report=_sweep_ufm_report, from_report=_sweep_ufm_result)
except ImportError:  # pragma: no cover - the sweep module is part of the package
    pass
