"""CLI for the representation-alignment (CRH/PAH) family: ``ncproofs solve crh`` and ``ncproofs table crh``.

This module only parses and validates arguments, builds the instance and calls
``proofs_check.claims.crh.check_instance`` (solve) or the cached experiment (table).
"""

from __future__ import annotations

import argparse
import math

from proofs_check.commands import SolveCommand, TableCommand, UsageError, float_list
from proofs_check.tables import Table

#: The --quick preset: 2e4 SGD steps, raised so that gamma * lr * steps >= QUICK_MIN_PRODUCT for the
#: smallest positive weight decay (the effect needs that many "weight-decay times"), capped at the
#: reference 2e5. Measured times are in docs/crh.md.
QUICK_STEPS = 20_000
QUICK_MIN_PRODUCT = 10.0
FULL_STEPS = 200_000


def _common(p: argparse.ArgumentParser, *, table: bool) -> None:
    from solvers.crh_budget import SAFETY_WALL_S  # not solvers.crh: that imports theory.crh and sympy (0.5 s)

    if table:
        p.add_argument("--weight-decays", type=float_list, default=[0.0, 1e-3, 1e-2],
                       help="comma-separated weight decays (default 0,1e-3,1e-2)")
    else:
        p.add_argument("--weight-decay", type=float_list, default=[1e-2],
                       help="weight decay gamma (comma-separated for several; gamma = 0 is always added as the "
                            "baseline) (default 1e-2)")
    p.add_argument("--steps", type=int, default=None, help=f"SGD steps (default {FULL_STEPS}, the reference experiment)")
    p.add_argument("--quick", action="store_true",
                   help=f"quick preset: {QUICK_STEPS} steps, or more so that gamma*lr*steps >= {QUICK_MIN_PRODUCT:g}")
    p.add_argument("--lr", type=float, default=0.05, help="SGD step size (default 0.05)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", type=int, default=None,
                   help="checkpoints averaged over the second half (default 200, 50 with --quick)")
    p.add_argument("--mode", choices=("normalized", "raw"), default="normalized",
                   help="normalized: per-sample-normalised centred covariances (experiments); raw: second moments")
    p.add_argument("--metric", choices=("pearson", "cosine"), default="pearson")
    p.add_argument("--null-draws", type=int, default=200, help="Haar rotations for the null baseline (default 200)")
    p.add_argument("--time-budget", type=float, default=SAFETY_WALL_S,
                   help=f"wall-clock safety limit in seconds, in (0, {SAFETY_WALL_S:g}] (default {SAFETY_WALL_S:g}); the "
                        "work budget (SGD steps, checked before work starts) decides; the safety limit only stops a "
                        "run on a machine far slower than calibrated, and then the statements are INCONCLUSIVE")
    p.add_argument("--init-scale", type=float, default=None, metavar="S",
                   help="lazy-training scale S: train S (f - f_0) with the loss scaled by 1/S^2 (Chizat-Oyallon-Bach); "
                        "large S (e.g. 1000) is the lazy regime, small S feature learning (default: the plain model)")
    p.add_argument("--neuron-noise", type=float, default=0.0, metavar="SIGMA",
                   help="Gaussian noise N(0, SIGMA^2) added to the neurons of --noise-layer in every SGD step")
    p.add_argument("--noise-layer", type=int, default=None, metavar="L",
                   help="hidden layer (1-based, 1 .. layers-1) whose output neurons get --neuron-noise")


def _gammas(values, flag: str) -> list[float]:
    from theory.crh import MAX_WEIGHT_DECAY

    if not values:
        raise UsageError(f"{flag} must list at least one weight decay")
    for g in values:
        if not (isinstance(g, float) and math.isfinite(g)):
            raise UsageError(f"{flag} (weight decay) must be finite numbers in [0, {MAX_WEIGHT_DECAY:g}], got {g}")
        if not 0.0 <= g <= MAX_WEIGHT_DECAY:
            raise UsageError(f"{flag} (weight decay) must be in [0, {MAX_WEIGHT_DECAY:g}], got {g}")
    return sorted(set(float(g) for g in values))


def _config(args, gammas):
    from solvers.crh import SAFETY_WALL_S
    from theory.crh import MAX_INIT_SCALE, MAX_LR, MAX_NOISE, MAX_STEPS, MIN_INIT_SCALE, MIN_LR, CRHExperiment

    lr = args.lr
    if lr is None or not math.isfinite(lr) or not MIN_LR <= lr <= MAX_LR:
        raise UsageError(f"--lr must be > 0, in [{MIN_LR:g}, {MAX_LR:g}], got {lr}")
    if args.seed is None or args.seed < 0 or args.seed > 2 ** 63 - 1:
        raise UsageError(f"--seed must be an integer in [0, 2^63 - 1], got {args.seed}")
    tb = getattr(args, "time_budget", None)
    if tb is not None and not (math.isfinite(tb) and 0 < tb <= SAFETY_WALL_S):
        raise UsageError(f"--time-budget (wall-clock safety limit) must be in (0, {SAFETY_WALL_S:g}] seconds, got {tb}")
    scale = getattr(args, "init_scale", None)
    if scale is not None and not (math.isfinite(scale) and MIN_INIT_SCALE <= scale <= MAX_INIT_SCALE):
        raise UsageError(f"--init-scale must be in [{MIN_INIT_SCALE:g}, {MAX_INIT_SCALE:g}], got {scale}")
    sigma = getattr(args, "neuron_noise", 0.0) or 0.0
    if not (math.isfinite(sigma) and 0.0 <= sigma <= MAX_NOISE):
        raise UsageError(f"--neuron-noise must be in [0, {MAX_NOISE:g}], got {sigma}")
    layer = getattr(args, "noise_layer", None)
    n_layers = 4  # the experiment's MLP 16-32-32-32-4
    if layer is not None and not 1 <= layer <= n_layers - 1:
        raise UsageError(f"--noise-layer must be a hidden layer in [1, {n_layers - 1}], got {layer}")
    if sigma > 0 and layer is None:
        raise UsageError("--neuron-noise > 0 needs --noise-layer (the hidden layer whose neurons get the noise)")
    if args.steps is not None:
        steps = args.steps
    elif args.quick:
        pos = [g for g in gammas if g > 0]
        need = math.ceil(QUICK_MIN_PRODUCT / (min(pos) * lr)) if pos else QUICK_STEPS
        steps = int(min(FULL_STEPS, max(QUICK_STEPS, need)))
    else:
        steps = FULL_STEPS
    if not 2 <= steps <= MAX_STEPS:
        raise UsageError(f"--steps must be >= 2 and <= {MAX_STEPS:.0e}, got {steps}")
    records = args.records if args.records is not None else (50 if args.quick else 200)
    if records < 1:
        raise UsageError(f"--records must be >= 1, got {records}")
    available = steps - steps // 2  # the checkpoints of the second half
    if args.records is not None and records > available:
        # a typed --records above it was cut to it silently (--steps 10 --records 100 averaged 5 checkpoints)
        raise UsageError(f"--records {records} exceeds the {available} steps of the second half of --steps {steps} "
                         f"(records are distinct checkpoints there); pass --records <= {available} or more --steps")
    records = min(records, available)  # the default (200, or 50 with --quick) adapts to short runs
    return CRHExperiment(weight_decays=tuple(gammas), steps=steps, lr=lr, seed=args.seed, n_records=records,
                         init_scale=scale, neuron_noise=sigma, noise_layer=layer)


def _null_draws(args) -> int:
    from proofs_check.claims.crh import MAX_NULL_DRAWS

    if args.null_draws is None or not 2 <= args.null_draws <= MAX_NULL_DRAWS:
        raise UsageError(f"--null-draws must be in [2, {MAX_NULL_DRAWS}], got {args.null_draws}")
    return args.null_draws


def _sized_by_options(flag: str):
    """The budget's refusal (``instance too large (steps=..., runs=...)``) names the options that size the work."""
    import contextlib

    from theory._validate import InputError

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except InputError as exc:
            if str(exc).startswith("instance too large"):
                raise UsageError(f"--steps, --records, --null-draws and {flag} (the number of runs): {exc}") from None
            raise

    return guard()


def solve(args) -> dict:
    from proofs_check.claims import crh as C

    gammas = _gammas(args.weight_decay, "--weight-decay")
    gammas = sorted(set([0.0] + gammas))
    null_draws = _null_draws(args)
    cfg = _config(args, gammas)
    with _sized_by_options("--weight-decay"):
        report = C.check_instance(cfg, mode=args.mode, metric=args.metric, null_draws=null_draws,
                                  time_budget_s=args.time_budget)
    return report.to_dict()


def render(out: dict) -> str:
    from theory.crh import RELATION_NAMES

    inst = out["instance"]
    sol = out.get("solution") or {}
    lines = [f"family: crh  (MLP {inst['widths']}, {inst['activation']}, steps={inst['steps']}, lr={inst['lr']}, "
             f"batch={inst['batch_size']}, seed={inst['seed']}; {inst['mode']} covariances, {inst['metric']}; "
             f"{(sol.get('seconds') or 0.0):.1f} s)"]
    if inst.get("init_scale") is not None:
        lines.append(f"lazy-training scale S = {inst['init_scale']:g} (model S (f - f_0)); relative weight change per run: "
                     + ", ".join(f"{r.get('weight_change', float('nan')):.3g}" for r in out.get("runs") or []))
    if inst.get("noise_layer") is not None:
        lines.append(f"neuron noise sigma = {inst['neuron_noise']:g} on the output of layer {inst['noise_layer']}")

    def f(x):
        return "  null" if x is None else f"{x:6.3f}"
    for run in out.get("runs") or []:
        lines.append("")
        lines.append(f"weight decay {run['weight_decay']:g}: final loss {f(run['final_loss']).strip()}"
                     + ("  DIVERGED" if run["diverged"] else ""))
        if not run["layers"]:
            continue
        lines.append("  layer  " + " ".join(f"{r:>7}" for r in RELATION_NAMES) + "   null(mean)  rank  stat.res  "
                     "PAH H_a~Z_a G_b~Z_b   top singular values")
        for L in run["layers"]:
            if not L.get("alignments"):
                lines.append(f"  {L['layer']:>5}  (no checkpoint recorded)")
                continue
            nm = [v for v in L["null_mean"].values() if v is not None]
            pah = L["pah"]
            sv = ", ".join(f"{s:.3g}" for s in L["singular_values"][:6])
            rank = "null" if L["numerical_rank"] is None else L["numerical_rank"]
            lines.append(f"  {L['layer']:>5}  " + " ".join(f" {f(L['alignments'][r])}" for r in RELATION_NAMES)
                         + f"   {f(sum(nm) / len(nm) if nm else None)}     {rank:>4}  "
                         f"{f(L['stationarity_residual'])}  {f(pah['H_a~Z_a']['slope'])}  {f(pah['G_b~Z_b']['slope'])}"
                         f"   {sv}")
    lines.append("")
    from proofs_check.cli import render_claims

    lines.extend(render_claims(out))  # one short line per statement, diagnostics, the verdict
    return "\n".join(lines)


def table(args) -> Table:
    from proofs_check.claims.crh import _layer_rows, experiment, validate_solve_options
    from theory.crh import RELATION_NAMES

    gammas = _gammas(args.weight_decays, "--weight-decays")
    null_draws = _null_draws(args)
    cfg = _config(args, gammas)
    with _sized_by_options("--weight-decays"):
        validate_solve_options(cfg, args.mode, args.metric, null_draws)
        res = experiment(cfg, args.time_budget)
    rows = []
    for i, g in enumerate(cfg.weight_decays):
        if res.diverged[i] or res.n_recorded == 0:
            rows.append([g, None] + [None] * (len(RELATION_NAMES) + 4))
            continue
        for L in _layer_rows(cfg, i, args.mode, args.metric, null_draws, args.time_budget):
            nm = [v for v in L["null_mean"].values() if v is not None]
            rows.append([g, L["layer"]] + [L["alignments"][r] for r in RELATION_NAMES] +
                        [sum(nm) / len(nm) if nm else None, L["numerical_rank"], L["stationarity_residual"],
                         L["magnitude_ratio"]])
    caption = (f"Alignment ({args.metric}, {args.mode} covariances) versus weight decay in the MLP "
               f"{list(cfg.widths)} (tanh, no bias, MSE, SGD batch {cfg.batch_size}, lr {cfg.lr:g}, {cfg.steps} steps, "
               f"matrices averaged over {cfg.n_records} checkpoints of the second half, seed {cfg.seed}). "
               f"Haar baseline = mean alignment of Haar-rotated matrices over the six relations ({null_draws} draws); rank at 5% of "
               f"the top singular value; stat.res = ||E[g_b h_a^T] - gamma W|| / ||gamma W||; magnitude = "
               f"tr(G_b)/(gamma^2 tr(H_b)) (>= (tr Z_b/tr H_b)^2 by Cauchy-Schwarz at stationarity).")
    if res.budget_reached:
        caption += f" INCOMPLETE: {res.budget_message}."
    cols = ["weight_decay", "layer"] + list(RELATION_NAMES) + ["null_mean", "rank", "stat_residual", "magnitude_ratio"]
    latex = [r"$\gamma$", "layer"] + list(RELATION_NAMES) + \
        ["Haar baseline", "rank", "stat. res.", r"$\mathrm{tr}\,G_b/(\gamma^2\mathrm{tr}\,H_b)$"]
    return Table(cols, rows, caption, latex_columns=latex, digits=4,
                 meta={"config": cfg.to_dict(), "seconds": res.seconds, "steps_done": res.steps_done,
                       "budget_reached": res.budget_reached})


COMMANDS = [
    SolveCommand("crh", "representation alignment (CRH/PAH): the small MLP experiment with weight decay",
                 lambda p: _common(p, table=False), solve, render),
    TableCommand("crh", "alignment of the six CRH relations versus weight decay (the paper's figure as a table)",
                 lambda p: _common(p, table=True), table),
]
