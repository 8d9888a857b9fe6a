"""CLI for the block-structured NTK family: ``ncproofs solve ntk`` and ``ncproofs table ntk``."""

from __future__ import annotations

import argparse
import itertools

from proofs_check.commands import SolveCommand, TableCommand, float_list, int_list
from proofs_check.tables import Table
from theory import ntk as th
from theory._validate import InstanceError

REFERENCE_ROWS = ((3, 4, (1.0, 0.6, 0.2)), (4, 3, (1.0, 0.5, 0.0)))
#: A table of closed forms costs ~50 us per row: 100000 rows ~ 5 s.
MAX_TABLE_ROWS = 100_000
#: --step-size of the discrete steps (below: ceil(T / eta) overflows; above: the state overflows in one step)
STEP_SIZE_RANGE = (1e-12, 1e3)


def _triple(name: str, values) -> tuple[float, float, float]:
    from proofs_check.claims.ntk import _triple as triple

    return triple(name, values)


# --------------------------------------------------------------------------------------
# solve
# --------------------------------------------------------------------------------------

def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classes", "-C", type=int, default=None, help="number of classes C >= 2 (default 3)")
    p.add_argument("--per-class", "-m", type=int, default=None, help="samples per class m >= 2 (default 4)")
    p.add_argument("--kappa", type=float_list, default=[1.0, 0.6, 0.2], metavar="KD,KC,KN",
                   help="feature-kernel constants (default 1,0.6,0.2); the block kernel must be positive definite")
    p.add_argument("--gamma", type=float_list, default=None, metavar="GD,GC,GN",
                   help="output-kernel constants: also integrate dR/dt = -s R K_gamma and fit its three rates")
    p.add_argument("--feature-dim", "-n", type=int, default=None,
                   help="feature dimension n (default C+1; N+C for --init lazy; at most 256)")
    p.add_argument("--init-scale", type=float, default=None, metavar="EPS",
                   help="initialisation scale in [1e-100, 1e6] (default 1e-6; for --init lazy the scale L of W and H, "
                        "default 10)")
    p.add_argument("--time", type=float, default=None, metavar="T",
                   help="integration time (default 30/s; 60/s for --init e-zero; for --init lazy 12/(s lambda_0^gamma), "
                        "i.e. 12 e-folds of the slowest residual part, at most 60/s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--s", type=float, default=1.0, help="loss scale s (rescales time; default 1)")
    p.add_argument("--init", choices=("random", "e-zero", "lazy"), default="random",
                   help="random: i.i.d. N(0, eps^2) W, H (default); e-zero: exact E = 0; "
                        "lazy: W W^T = L^2 I and block features of size L")
    p.add_argument("--mean-weight", type=float, default=0.0,
                   help="for --init e-zero: weight in [0,1) of the all-ones direction (M^T h_bar != 0)")
    p.add_argument("--max-seconds", type=float, default=None, metavar="S",
                   help="work budget of each integration, in seconds at the work model's rate (default 60): it "
                        "becomes a count of DOP853 steps, so the verdict does not depend on the machine's load; runs "
                        "estimated beyond it are refused, runs that reach it stop and report INCONCLUSIVE; a "
                        "wall-clock safety net 20x above it stops a run only on a machine >20x slower, and says so")
    g = p.add_argument_group("beyond the block kernel (docs/ntk.md, 'Beyond the block kernel')")
    g.add_argument("--kernel", default=None, metavar="K.npy",
                   help="a fixed symmetric positive definite N x N feature kernel (samples ordered by class)")
    g.add_argument("--kernel-perturbation", type=float, default=None, metavar="RHO",
                   help="K = Kb + K0 with K0 a seeded random PSD matrix of relative Frobenius size RHO (--seed)")
    g.add_argument("--counts", type=int_list, default=None, metavar="N1,N2,...",
                   help="class sizes (imbalanced block kernel with --kappa, or the classes of --kernel)")
    g.add_argument("--loss", choices=("mse", "ce"), default="mse", help="loss: mse (default) or ce (cross-entropy)")
    g.add_argument("--sgd-batch", type=int, default=None, metavar="B",
                   help="discrete mini-batch steps with batches of B (needs --step-size)")
    g.add_argument("--step-size", type=float, default=None, metavar="ETA", help="discrete step size eta")
    g.add_argument("--steps", type=int, default=None, help="number of discrete steps (default ceil(T/eta))")


def _general(args) -> bool:
    return any(getattr(args, k, None) is not None for k in ("kernel", "kernel_perturbation", "counts", "sgd_batch",
                                                             "step_size", "steps")) or getattr(args, "loss", "mse") != "mse"


def _check_general_options(rhos, counts_lists) -> None:
    """--kernel-perturbation and --counts refused naming the option (the model builder names rho and N)."""
    for rho in rhos:
        if rho is not None and not 0.0 <= rho <= 1e3:
            raise InstanceError(f"--kernel-perturbation must be in [0, 1000] (relative Frobenius size), got {rho:g}")
    for c in counts_lists:
        if c and sum(c) > th.MAX_GENERAL_SAMPLES:
            raise InstanceError(f"--counts: N = {sum(c)} samples exceeds the limit {th.MAX_GENERAL_SAMPLES} for a "
                                "general kernel")


def _check_samples(args, limit: int, what: str) -> None:
    """N = C m against ``limit``, named by the options that set it (the solvers name only C, m and N; C = 2^63 - 1
    overflowed the default feature dimension C + 1 first, a message naming n)."""
    C, m = getattr(args, "classes", None), getattr(args, "per_class", None)
    if getattr(args, "counts", None) or not isinstance(C, int) or not isinstance(m, int) or C < 2 or m < 1:
        return  # --counts, or a value the instance refuses itself
    if C * m > limit:
        raise InstanceError(f"--classes/-C x --per-class/-m: N = C m = {C} x {m} = {C * m} samples exceeds the limit "
                            f"{limit} ({what})")


def _feature_dim_named(args):
    """The solvers' ``n (feature dimension) ...`` refusals, named by the option that set n: --feature-dim, or
    --classes / --counts through the default n = C + 1."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except InstanceError as exc:
            if not str(exc).startswith("n (feature dimension)"):
                raise
            opt = ("--feature-dim" if args.feature_dim is not None else
                   "--counts / --classes (the default feature dimension n = C + 1)")
            raise InstanceError(f"{opt}: {exc}") from None

    return guard()


def _check_table_work(cg, counts, rhos, kappa, args) -> None:
    """The table's flows together within one flow's work budget, estimated before any flow runs (each flow
    was checked alone: --counts 1000,1000 ran for minutes, 200 such rows for hours)."""
    from solvers import ntk_general as sg

    if len(counts) * len(rhos) > cg.MAX_TABLE_ROWS:
        return  # table_rows refuses it with its own message
    # a lower bound first, from the sizes alone (stiffness >= N: steps >= 300 + T N / 4; n = C + 1 features), so
    # that a huge grid is refused before any kernel is built (C = 1000 took a minute to build)
    low = sum((300.0 + cg.DEFAULT_T * sum(c) / 4.0) * 12.0 * 6.0 * len(c) * (len(c) + 1) * sum(c)
              for c in counts) * len(rhos)
    if low > sg.MAX_FLOPS:
        raise InstanceError("--counts x --kernel-perturbation: the table's flows together exceed the work budget, at least: "
                            f"{sg.flops_text(low)}; fewer or smaller --counts")
    total = 0.0
    for c in counts:
        for rho in rhos:
            model = cg.build_model(counts=tuple(c), kappa=kappa, rho=rho, seed=args.seed, loss=args.loss)
            st0 = sg.init_random(model, model.C + 1, cg.DEFAULT_EPS, args.seed)
            total += sg.estimate_steps(model, st0, cg.DEFAULT_T)["flops"]
    if total > sg.MAX_FLOPS:
        raise InstanceError("--counts x --kernel-perturbation: the table's flows together exceed the work budget: "
                            f"{sg.flops_text(total)}; fewer or smaller --counts")


def _general_max_flops() -> float:
    from solvers import ntk_general as sg

    return sg.MAX_FLOPS


def run_general_solve(args: argparse.Namespace) -> dict:
    from proofs_check.claims import ntk_general as cg

    if args.gamma is not None or args.init == "lazy" or args.mean_weight:
        raise InstanceError("--gamma, --init lazy and --mean-weight apply to the block kernel only (not with --kernel, "
                            "--kernel-perturbation, --counts, --loss ce or --sgd-batch)")
    if args.steps is not None and args.step_size is None:
        raise InstanceError("--steps needs --step-size ETA (discrete steps)")
    # options the general routes do not read were ignored silently (--max-seconds 1e-9 ran to VERIFIED; --time with
    # --steps was reported as the run's time while the steps ran --steps x --step-size)
    if args.max_seconds is not None:
        raise InstanceError("--max-seconds is the block kernel's work budget; the general kernel's runs (--kernel, "
                            "--kernel-perturbation, --counts, --loss ce, --sgd-batch) have a fixed work budget of "
                            f"{_general_max_flops():.0e} flops, checked before they start; drop --max-seconds")
    if args.steps is not None and args.time is not None:
        raise InstanceError("--time with --steps: the discrete run lasts --steps x --step-size; give one of --time "
                            "(steps = ceil(time / step size)) or --steps")
    _check_general_options([args.kernel_perturbation], [args.counts])
    _check_samples(args, th.MAX_GENERAL_SAMPLES, "for a general kernel")
    C = len(args.counts) if args.counts else args.classes
    if args.feature_dim is None and C is not None and C + 1 > 256:  # before the N x N kernel is built (a minute)
        raise InstanceError(f"--counts / --classes: the default feature dimension n = C + 1 = {C + 1} exceeds the "
                            "limit 256 (pass --feature-dim, or fewer classes)")
    if args.step_size is not None and not STEP_SIZE_RANGE[0] <= args.step_size <= STEP_SIZE_RANGE[1]:
        # 1e-320 made ceil(T / eta) infinite (OverflowError), 1e308 overflowed the state in the first step
        raise InstanceError(f"--step-size must be in [{STEP_SIZE_RANGE[0]:g}, {STEP_SIZE_RANGE[1]:g}], "
                            f"got {args.step_size:g}")
    kernel = cg.load_kernel(args.kernel) if args.kernel is not None else None
    if kernel is not None and not args.counts and getattr(kernel, "ndim", 0) == 2 \
            and kernel.shape[0] != args.classes * args.per_class and getattr(args, "per_class_typed", False):
        raise InstanceError(f"--per-class/-m {args.per_class} contradicts --kernel {args.kernel}: its N = "
                            f"{kernel.shape[0]} samples and C = {args.classes} classes give m = N / C; drop --per-class")
    model = cg.build_model(counts=args.counts, classes=args.classes, per_class=args.per_class,
                           kappa=_triple("kappa", args.kappa), kernel=kernel, rho=args.kernel_perturbation or 0.0,
                           seed=args.seed, s=args.s, loss=args.loss)
    import numpy as np

    try:
        with np.errstate(over="ignore", invalid="ignore"), _feature_dim_named(args):  # a diverging run: one line
            rep = cg.check_general_instance(model, feature_dim=args.feature_dim, init=args.init,
                                            init_scale=args.init_scale, T=args.time, seed=args.seed,
                                            sgd_batch=args.sgd_batch, step_size=args.step_size, steps=args.steps)
    except InstanceError as exc:
        if args.step_size is not None and "finite" in str(exc):
            raise InstanceError(f"--step-size {args.step_size:g}: the discrete steps diverged (the state overflowed "
                                f"to inf/NaN: {exc}); use a smaller --step-size") from None
        raise
    return rep.to_dict()


def _resolve_sizes(args: argparse.Namespace) -> None:
    """--classes / --per-class (defaults 3 and 4) next to --counts must agree with it: the counts set the classes, so
    a different typed value was silently ignored (``--counts 2,3 --classes 3 --per-class 7`` solved counts 2,3)."""
    counts = getattr(args, "counts", None)
    C, m = getattr(args, "classes", None), getattr(args, "per_class", None)
    if counts:
        if C is not None and C != len(counts):
            raise InstanceError(f"--classes/-C {C} contradicts --counts {','.join(map(str, counts))} ({len(counts)} "
                                "classes): the counts set the classes; drop --classes or fix one of them")
        if m is not None and any(c != m for c in counts):
            raise InstanceError(f"--per-class/-m {m} contradicts --counts {','.join(map(str, counts))}: the counts set "
                                "the class sizes; drop --per-class or fix one of them")
    args.classes = 3 if C is None else C
    args.per_class = 4 if m is None else m
    args.per_class_typed = m is not None  # with --kernel, N / C sets m (checked once the kernel is read)


def run_solve(args: argparse.Namespace) -> dict:
    from proofs_check.claims import ntk as cl

    _resolve_sizes(args)
    if _general(args):
        return run_general_solve(args)

    from solvers.ntk import MAX_SAMPLES

    _check_samples(args, MAX_SAMPLES, "an N x N kernel")
    inst = th.NTKInstance(args.classes, args.per_class, _triple("kappa", args.kappa), args.s)
    with _feature_dim_named(args):
        report = cl.check_instance(inst, gamma=args.gamma, feature_dim=args.feature_dim, init=args.init,
                                   init_scale=args.init_scale, T=args.time, seed=args.seed,
                                   mean_weight=args.mean_weight,
                                   max_seconds=cl.DEFAULT_MAX_SECONDS if args.max_seconds is None else args.max_seconds)
    return report.to_dict()


def _g(x, digits=6) -> str:
    if x is None:
        return "null"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_g(v, digits) for v in x[:6]) + (", …" if len(x) > 6 else "") + "]"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def render_general(out: dict) -> str:
    i = out["instance"]
    md = i["model"]
    f = out["final"]
    lines = [f"ntk (general kernel): counts={md['counts']}, loss={md['loss']}, s={_g(md['s'])}, kernel eigenvalues in "
             f"[{_g(md['kernel_eigenvalue_range'][0], 4)}, {_g(md['kernel_eigenvalue_range'][1], 4)}]"
             + (f", kappa={_g(md.get('kappa'))}" if md.get("kappa") else "") + f", perturbation={_g(md.get('perturbation'))}"
             f", n={i['feature_dim']}, init={i['init']} (scale {_g(i['init_scale'])}), T={_g(i['time'])}, seed={i['seed']}"
             + (f", sgd batch {i['sgd_batch']} step {_g(i['step_size'])} x {i['steps']}" if i.get("step_size") else "")]
    err = out.get("integration_error") or {}
    lines.append(f"final: loss {_g(f['loss'], 4)}, NC1 {_g(f['nc1'], 4)}, ETF distance {_g(f['distance_etf'], 4)} "
                 f"(integration error ~{_g(err.get('distance_etf'), 2)}), bias {_g(f['bias'], 5)}")
    cos = f["cosines"] or []
    lines.append("class-mean cosines: " + "; ".join("[" + ", ".join(_g(x, 6) for x in row) + "]" for row in cos[:6]))
    if out.get("invariant"):
        lines.append(f"invariant: max drift {_g(out['invariant']['max_drift'], 3)} (scale {_g(out['invariant']['scale'], 3)})")
    if out.get("sgd"):
        lines.append(f"discrete steps: total drift of E {_g(out['sgd']['E_total_drift'], 4)} (not conserved)")
    r = out.get("rates") or {}
    if r.get("escape_predicted"):
        fit = r.get("escape_fitted") or {}
        lines.append(f"escape rate: predicted s sqrt(eig(R0 K R0^T)) in [{_g(min(r['escape_predicted']))}, "
                     f"{_g(max(r['escape_predicted']))}], fitted {_g(fit.get('rate'))}")
    from proofs_check.cli import render_claims

    lines.extend(render_claims(out))
    return "\n".join(lines)


def render_solve(out: dict) -> str:
    if "final" in out and isinstance(out.get("instance", {}).get("model"), dict):
        return render_general(out)
    i = out["instance"]
    p = out["predicted"]
    lines = [f"ntk: C={i['classes']}, m={i['per_class']}, kappa={_g(i['kappa'])}, s={_g(i['s'])}, n={i['feature_dim']}, "
             f"init={i['init']} (scale {_g(i['init_scale'])}), T={_g(i['time'])}, seed={i['seed']}"
             + (f", gamma={_g(i['gamma'])}" if i.get("gamma") else "")]
    sp = out["spectrum"]
    lines.append("spectrum: " + ", ".join(f"{e['name']} = {_g(e['value'])} (x{e['multiplicity']})" for e in sp["predicted"])
                 + f"; numeric max error {_g(sp['max_abs_error'], 3)}; alpha = {_g(p['alpha'])}")
    lines.append("rates (predicted / fitted):")
    for group, comps in out["rates"].items():
        if group in ("escape", "late_within"):
            e = comps
            lines.append(f"  {group:<22} {_g(e['predicted'])} / {_g(e['fitted'])}"
                         + (f"  ({e['reason']})" if e.get("fitted") is None and e.get("reason") else ""))
            continue
        for k, e in comps.items():
            if isinstance(e, dict):
                lines.append(f"  {group + '.' + k:<22} {_g(e['predicted'])} / {_g(e['fitted'])}")
    inv = out["invariant"]
    lines.append(f"invariant: max drift {_g(inv['max_drift'], 3)} (scale {_g(inv['scale'], 3)}), "
                 f"||E(0)|| = {_g(inv['E0_norm'], 4)}, lambda_min(E) = {_g(inv['lambda_min_E'], 4)}")
    lines.append("small-init limits (predicted / measured):")
    for k, e in out["limits"].items():
        lines.append(f"  {k:<18} {_g(e['predicted'])} / {_g(e['measured'])}")
    ph = out["phases"]
    lines.append(f"loss {_g(ph['loss_initial'], 4)} -> {_g(ph['loss_final'], 4)}; scatter tr(DD^T) "
                 f"{_g(ph['scatter_initial'], 4)} -> {_g(ph['scatter_final'], 4)}; |h_bar| = {_g(ph['hbar_norm'], 3)}, "
                 f"|M^T h_bar| = {_g(ph['g_norm'], 3)}")
    geo = out["geometry"]
    lines.append(f"geometry: {geo['classification']} (distance to ETF {_g(geo['distance_etf'], 3)}); metrics: "
                 + ", ".join(f"{k}={_g(v, 3)}" for k, v in geo["metrics"].items()))
    from proofs_check.cli import render_claims

    lines.extend(render_claims(out))  # one short line per statement, diagnostics, the verdict
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# table
# --------------------------------------------------------------------------------------

def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classes", "-C", type=int_list, default=None, metavar="C1,C2,...",
                   help="class counts (default: the reference rows of docs/ntk.md)")
    p.add_argument("--per-class", "-m", type=int_list, default=None, metavar="M1,M2,...", help="samples per class")
    p.add_argument("--kappa", type=float_list, action="append", default=None, metavar="KD,KC,KN",
                   help="kernel constants; repeat for several kernels")
    p.add_argument("--s", type=float, default=1.0, help="loss scale s (rates scale by s)")
    p.add_argument("--kernel-perturbation", type=float_list, default=None, metavar="R1,R2,...",
                   help="integrate small-init flows for these perturbation sizes rho (K = Kb + K0): NC1 and ETF distance")
    p.add_argument("--counts", type=int_list, action="append", default=None, metavar="N1,N2,...",
                   help="class sizes (repeat for several); with --kernel-perturbation")
    p.add_argument("--loss", choices=("mse", "ce"), default="mse")
    p.add_argument("--seed", type=int, default=0)


def build_general_table(args: argparse.Namespace) -> Table:
    from proofs_check.claims import ntk_general as cg

    # the flows' rows take counts, rho, kappa, loss and seed only: these options were silently ignored here
    ignored = [o for o, typed in (("--classes/-C", args.classes is not None), ("--per-class/-m", args.per_class is not None),
                                  ("--s", args.s != 1.0)) if typed]
    if ignored:
        raise InstanceError(f"{', '.join(ignored)}: not used by the flows' table (--kernel-perturbation / --counts / "
                            "--loss ce: class sizes from --counts, s = 1); drop "
                            f"{'them' if len(ignored) > 1 else 'it'} or use the constants' table (no --counts)")
    rhos = args.kernel_perturbation if args.kernel_perturbation is not None else [0.0]
    if not rhos:
        raise InstanceError("--kernel-perturbation must list at least one number")
    counts = args.counts or [[4, 4, 4]]
    if any(not c for c in counts):
        raise InstanceError("--counts must list at least one class size")
    _check_general_options(rhos, counts)
    if args.kappa is not None and len(args.kappa) > 1:
        raise InstanceError("one --kappa with --kernel-perturbation/--counts")
    kappa = _triple("kappa", args.kappa[0]) if args.kappa else cg.KAPPA
    _check_table_work(cg, counts, rhos, kappa, args)
    rows = cg.table_rows(counts, rhos, kappa, args.loss, args.seed)
    cols = ["counts", "rho", "NC1(T)", "ETF distance", "min cosine", "max cosine", "integration error (distance)", "reached"]
    caption = (f"Small-initialisation flows (eps = 1e-6, T = 30, n = C + 1, {args.loss}, kappa = {tuple(kappa)}, seed "
               f"{args.seed}) with K = Kb + K0, ||K0||_F = rho ||Kb||_F (docs/ntk.md, 'Beyond the block kernel'): NC1 and "
               "the centred class means' distance to the simplex ETF at T.")
    return Table(cols, rows, caption, digits=6, meta={"family": "ntk", "kappa": list(kappa), "loss": args.loss})


def build_table(args: argparse.Namespace) -> Table:
    if args.kernel_perturbation is not None or args.counts is not None or args.loss != "mse":
        return build_general_table(args)
    if args.classes is None and args.per_class is None and args.kappa is None:
        grid = list(REFERENCE_ROWS)
    else:
        for name, val in (("--classes", args.classes), ("--per-class", args.per_class)):
            if val is not None and not val:
                raise InstanceError(f"{name} must list at least one integer (got an empty list)")
        Cs = args.classes if args.classes is not None else [3]
        ms = args.per_class if args.per_class is not None else [4]
        ks = [_triple("kappa", k) for k in (args.kappa or [[1.0, 0.6, 0.2]])]
        rows = len(Cs) * len(ms) * len(ks)
        if rows > MAX_TABLE_ROWS:
            raise InstanceError(f"the grid has {len(Cs)} x {len(ms)} x {len(ks)} = {rows} rows, more than the limit "
                                f"{MAX_TABLE_ROWS}")
        grid = list(itertools.product(Cs, ms, ks))
    rows = []
    for C, m, k in grid:
        inst = th.NTKInstance(C, m, k, args.s)
        lim = th.small_init_limits(inst)
        l0, lc, lg = inst.eigenvalues
        rows.append([C, m, k[0], k[1], k[2], l0, lc, lg, th.alpha(inst), lim["mean_sq_norm"], lim["W_fro_sq"],
                     lim["escape_rate"], lim["late_within_rate"]])
    cols = ["C", "m", "kappa_d", "kappa_c", "kappa_n", "lambda_0", "lambda_c", "lambda_g", "alpha",
            "||mu_c - h_bar||^2", "||W||_F^2", "escape rate", "late within-class rate"]
    latex = ["$C$", "$m$", r"$\kappa_d$", r"$\kappa_c$", r"$\kappa_n$", r"$\lambda_0$", r"$\lambda_c$", r"$\lambda_g$",
             r"$\alpha$", r"$\|\mu_c-\bar h\|^2$", r"$\|W\|_F^2$", "escape", "late within"]
    caption = (f"Block NTK (Seleznova et al. 2023 model), s = {args.s:g}: kernel eigenvalues lambda_0 (mult. C(m-1)), "
               "lambda_c (C-1), lambda_g (1); alpha = m kappa_n/lambda_g; small-initialisation limits "
               "||mu_c - h_bar||^2 = sqrt(lambda_c/m)(1-1/C), ||W||_F^2 = sqrt(m/lambda_c)(C-1), escape rate "
               "s sqrt(m lambda_c), late within-class rate s lambda_0 sqrt(m/lambda_c) (derived).")
    return Table(cols, rows, caption, latex_columns=latex, digits=6, meta={"family": "ntk", "s": args.s})


COMMANDS = [
    SolveCommand("ntk", "block-structured NTK gradient flow: spectrum, three rates, invariant, collapse",
                 _solve_args, run_solve, render_solve),
    TableCommand("ntk", "predicted block-NTK constants (eigenvalues, rates, limits) over a grid of kernels",
                 _table_args, build_table),
]
