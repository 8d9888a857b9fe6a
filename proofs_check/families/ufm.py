"""CLI: ``ncproofs solve ufm-ce|ufm-mse`` and ``ncproofs table ufm``."""

from __future__ import annotations

import argparse

from proofs_check.commands import (SolveCommand, TableCommand, UsageError, add_backend_arguments, backend_from_args,
                                   float_list, int_list)
from proofs_check.tables import Table
from theory import ufm as T
from theory._validate import InputError


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
    p.add_argument("--starts", type=int, default=3, help="random starts of the factored solver (default 3)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--max-memory", type=_bytes, default=None, metavar="BYTES",
                   help="memory budget, e.g. 4G or 500M (default: min(0.8 x available memory, 2.5G)); routes whose "
                        "size estimate exceeds it are refused (or skipped by --method auto)")
    add_backend_arguments(p)


def _bytes(text: str) -> float:
    """Parse 4G, 500M, 2.5e9 (argparse type)."""
    t = text.strip().upper().removesuffix("B")
    mult = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(t[-1:], 1.0)
    try:
        v = float(t[:-1] if mult != 1.0 else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size like 4G, 500M or 2.5e9, got {text!r}") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive finite size, got {text!r}")
    return v


def _run(loss: str):
    def run(args: argparse.Namespace) -> dict:
        from proofs_check.claims.ufm import check_instance

        if loss == "mse" and args.lambda_b is not None:
            raise UsageError("--lambda-b is not accepted for ufm-mse: the MSE closed form assumes an unregularized bias")
        if args.starts < 1:
            raise UsageError(f"--starts must be >= 1, got {args.starts}")
        if args.seed < 0:
            raise UsageError(f"--seed must be >= 0, got {args.seed}")
        inst = T.UFMInstance(loss, args.classes, args.per_class, args.dim, args.lambda_w, args.lambda_h,
                             args.lambda_b if args.lambda_b is not None else 0.0)
        backend = backend_from_args(args)
        return check_instance(inst, method=args.method, starts=args.starts, seed=args.seed,
                              max_memory=args.max_memory, **backend).to_dict()

    return run


def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loss", choices=("ce", "mse"), default="ce")
    p.add_argument("--classes", type=int_list, default=[3, 5, 10], help="comma-separated k values")
    p.add_argument("--per-class", type=int_list, default=[2], help="comma-separated n values")
    p.add_argument("--lambda", dest="lam", type=float_list, default=[1e-3, 1e-2, 1e-1],
                   help="comma-separated lw = lh values")


def _nonempty(option: str, values, what: str = "value") -> list:
    """A list option of ``table ufm`` must hold at least one entry: '' and ',,,' parse to [] (one line, exit 2)."""
    if values is not None and len(values) == 0:
        raise UsageError(f"{option} needs at least one {what} (comma-separated), got none")
    return values


def _table(args: argparse.Namespace) -> Table:
    _nonempty("--classes", args.classes, "number of classes k")
    _nonempty("--per-class", args.per_class, "sample count n")
    _nonempty("--lambda", args.lam, "weight decay")
    rows = []
    for k in args.classes:
        for n in args.per_class:
            for lam in args.lam:
                inst = T.UFMInstance(args.loss, k, n, max(k - 1, 1), lam, lam)
                p = T.optimum(inst)
                rows.append([k, n, lam, p.value, p.margin, "trivial" if p.trivial else "collapse"])
    margin = "optimal logit margin c*" if args.loss == "ce" else "singular value z"
    cap = (f"UFM-{args.loss.upper()} optimal values (balanced, lw = lh = lambda, d >= k-1; "
           + ("loss (1/N) sum CE + lw/2||W||^2 + lh/2||H||^2, unregularized bias" if args.loss == "ce" else
              "loss 1/(2N)||WH + b1^T - Y||^2 + lw/2||W||^2 + lh/2||H||^2, unregularized bias") + ").")
    return Table(["k", "n", "lambda", "f*", margin, "phase"], rows, cap,
                 latex_columns=["$k$", "$n$", "$\\lambda$", "$f^\\star$", "$c^\\star$" if args.loss == "ce" else "$z$",
                                "phase"])


def _counts_arg(text: str) -> list[int]:
    """Parse --counts 6,6,2,1 (argparse type); values are validated by the instance (>= 1)."""
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
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
    if args.starts < 1 or args.seed < 0:
        raise UsageError("--starts must be >= 1 and --seed >= 0")
    K = len(counts)
    eps = 0.0 if args.smoothing is None else args.smoothing
    if args.loss == "ls" and args.smoothing is None:
        raise UsageError("--loss ls needs --smoothing EPS")
    if args.smoothing is not None and args.loss not in ("ls", "weighted-ce"):
        raise UsageError("--smoothing applies to --loss ls (or weighted-ce)")
    loss = L.make_loss(args.loss, K, smoothing=eps, convention=args.smoothing_convention, weights=args.class_weights)
    return SG.classification(loss, counts, args.dim, args.lambda_w, args.lambda_h, args.lambda_b or 0.0)


def _run_general(args: argparse.Namespace) -> dict:
    from proofs_check.claims.ufm import check_general

    return check_general(general_problem(args), starts=args.starts, seed=args.seed,
                         claimed_value=args.claim_value).to_dict()


def _regression_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", required=True, metavar="Y.npy", help="targets, shape (N, m): one row per sample")
    p.add_argument("--dim", "-d", type=int, required=True, metavar="d", help="feature dimension d >= 1")
    p.add_argument("--lambda-w", type=float, required=True, metavar="LW", help="weight decay on W (> 0)")
    p.add_argument("--lambda-h", type=float, required=True, metavar="LH", help="weight decay on H (> 0)")
    p.add_argument("--claim-value", type=float, default=None, metavar="F", help="a claimed optimal value to check")
    p.add_argument("--seed", type=int, default=0, help="random seed of the factored route (default 0)")


def load_targets(path: str):
    import numpy as np

    try:
        Y = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"--targets: file not found: {path}") from None
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"--targets: cannot read {path} as a .npy array ({type(exc).__name__}: {exc})") from None
    if not isinstance(Y, np.ndarray):
        raise UsageError(f"--targets: {path} does not hold a single array")
    return Y


def _run_regression(args: argparse.Namespace) -> dict:
    from proofs_check.claims.ufm import check_regression

    return check_regression(load_targets(args.targets), args.dim, args.lambda_w, args.lambda_h,
                            claimed_value=args.claim_value, seed=args.seed).to_dict()


COMMANDS = [
    SolveCommand("ufm-ce", "cross-entropy UFM with weight decay (Zhu et al. 2021)", lambda p: _common(p, bias=True),
                 _run("ce")),
    SolveCommand("ufm-mse", "MSE UFM with weight decay, unregularized bias (Zhou et al. 2022)",
                 lambda p: _common(p, bias=False), _run("mse")),
    SolveCommand("ufm", "UFM with any loss (ce, mse, ls, weighted-ce) and any class counts, certified "
                 "(docs/ufm_general.md)", _general_args, _run_general),
    SolveCommand("ufm-regression", "neural regression collapse UFM (Andriopoulos et al. 2024), certified",
                 _regression_args, _run_regression),
    TableCommand("ufm", "closed-form optimal values of the UFM over a grid", _table_args, _table),
]


# ---- sweeps: `family = "ufm"` in a sweep config ------------------------------------------------

def _sweep_ufm(params: dict, seed: int) -> dict:
    from proofs_check.claims.ufm import check_instance

    inst = T.UFMInstance(params["loss"], params["k"], params["n"], params["d"], params["lw"], params["lh"],
                         params.get("lb", 0.0))
    out = check_instance(inst, method=params.get("method", "auto"), starts=int(params.get("starts", 2)),
                         seed=seed).to_dict()
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


try:
    from proofs_check.sweep import register_sweepable

    register_sweepable("ufm", _sweep_ufm, parameters=("loss", "k", "n", "d", "lw", "lh", "lb", "method", "starts"),
                       defaults={"loss": "ce", "lb": 0.0, "method": "auto", "starts": 2}, validate=_sweep_validate,
                       version="1", description="classic UFM instance: closed form vs certificate vs solvers",
                       replace=True)
except ImportError:  # pragma: no cover - the sweep module is part of the package
    pass
