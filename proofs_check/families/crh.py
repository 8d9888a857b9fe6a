"""CLI for the representation-alignment (CRH/PAH) family: ``ncproofs solve crh`` and ``ncproofs table crh``."""

from __future__ import annotations

import argparse
import math

from proofs_check.commands import SolveCommand, TableCommand, UsageError, float_list
from proofs_check.core import clean, worst
from proofs_check.tables import Table

#: The --quick preset: 2e4 SGD steps, raised so that gamma * lr * steps >= QUICK_MIN_PRODUCT for the
#: smallest positive weight decay (the effect needs that many "weight-decay times"), capped at the
#: spec's 2e5. Measured times are in docs/crh.md.
QUICK_STEPS = 20_000
QUICK_MIN_PRODUCT = 10.0
FULL_STEPS = 200_000


def _common(p: argparse.ArgumentParser, *, table: bool) -> None:
    if table:
        p.add_argument("--weight-decays", type=float_list, default=[0.0, 1e-3, 1e-2],
                       help="comma-separated weight decays (default 0,1e-3,1e-2)")
    else:
        p.add_argument("--weight-decay", type=float_list, default=[1e-2],
                       help="weight decay gamma (comma-separated for several; gamma = 0 is always added as the "
                            "baseline) (default 1e-2)")
    p.add_argument("--steps", type=int, default=None, help=f"SGD steps (default {FULL_STEPS}, the spec's experiment)")
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


def _config(args, gammas):
    from theory.crh import CRHExperiment

    for g in gammas:
        if not (isinstance(g, float) and math.isfinite(g)):
            raise UsageError(f"--weight-decay must be finite numbers, got {g}")
        if g < 0:
            raise UsageError(f"--weight-decay (weight decay) must be >= 0, got {g}")
    if args.lr is None or not math.isfinite(args.lr) or args.lr <= 0:
        raise UsageError(f"--lr must be > 0, got {args.lr}")
    if args.steps is not None:
        steps = args.steps
    elif args.quick:
        pos = [g for g in gammas if g > 0]
        need = math.ceil(QUICK_MIN_PRODUCT / (min(pos) * args.lr)) if pos else QUICK_STEPS
        steps = int(min(FULL_STEPS, max(QUICK_STEPS, need)))
    else:
        steps = FULL_STEPS
    records = args.records if args.records is not None else (50 if args.quick else 200)
    if steps < 2:
        raise UsageError(f"--steps must be >= 2, got {steps}")
    records = min(records, steps - steps // 2)
    return CRHExperiment(weight_decays=tuple(gammas), steps=steps, lr=args.lr, seed=args.seed, n_records=records)


def _layer_rows(cfg, run, args):
    import numpy as np
    from proofs_check.claims.crh import experiment, experiment_report, magnitude_ratio
    from theory.crh import RELATION_NAMES

    res = experiment(cfg)
    out = []
    for l in range(cfg.n_layers):
        rep = experiment_report(cfg, run, l, args.mode, args.null_draws)
        s = np.linalg.svd(res.W_mean[run][l], compute_uv=False)
        out.append({
            "layer": l + 1, "shape": list(res.W_mean[run][l].shape),
            "alignments": {r: rep.alignments[r][args.metric] for r in RELATION_NAMES},
            "null_mean": {r: rep.null[r][args.metric].mean if rep.null else None for r in RELATION_NAMES},
            "null_std": {r: rep.null[r][args.metric].std if rep.null else None for r in RELATION_NAMES},
            "all_metrics": rep.alignments,
            "pah": {k: v.to_dict() for k, v in rep.pah.items()},
            "singular_values": s.tolist(),
            "numerical_rank": int(np.sum(s / s[0] > 0.05)) if s[0] > 0 else 0,
            "stationarity_residual": res.stationarity_residual(run, l),
            "magnitude_ratio": magnitude_ratio(res, run, l),
        })
    return out


def solve(args) -> dict:
    from proofs_check.claims import crh as C

    gammas = sorted(set([0.0] + [float(g) for g in args.weight_decay]))
    if args.null_draws < 2:
        raise UsageError(f"--null-draws must be >= 2, got {args.null_draws}")
    cfg = _config(args, gammas)
    res = C.experiment(cfg)
    runs = [{"weight_decay": g, "final_loss": res.loss[i], "diverged": res.diverged[i],
             "layers": _layer_rows(cfg, i, args) if not res.diverged[i] else None}
            for i, g in enumerate(cfg.weight_decays)]
    claims = []
    for g in cfg.weight_decays:
        if g == 0:
            continue
        claims += [C.alignment_wd_claim(0.0, g, cfg=cfg, id=f"crh.experiment.alignment_vs_weight_decay[{g:g}]"),
                   C.rank_claim(gamma=g, cfg=cfg, id=f"crh.experiment.rank_drop[{g:g}]"),
                   C.stationarity_sgd_claim(g, cfg=cfg, id=f"crh.experiment.stationarity[{g:g}]"),
                   C.magnitude_claim(g, cfg=cfg, id=f"crh.experiment.magnitude[{g:g}]")]
    results = [c.run() for c in claims]
    verdict = worst(r.verdict for r in results) if results else None
    bad = [r for r in results if r.verdict == verdict]
    return clean({
        "family": "crh",
        "instance": cfg.to_dict() | {"mode": args.mode, "metric": args.metric, "null_draws": args.null_draws},
        "predicted": {"value": None, "geometry": None,
                      "statement": "alignment increases with weight decay in the last hidden layer; hidden weights "
                                   "drop to the task rank; magnitudes: open discrepancy"},
        "solution": {"value": min(res.loss), "method": "SGD with weight decay (numpy, runs vectorised)",
                     "converged": not any(res.diverged), "seconds": res.seconds},
        "certificate": None,
        "geometry": None,
        "runs": runs,
        "verdict": verdict.value if verdict else "INCONCLUSIVE",
        "reason": (bad[0].claim.id + ": " + bad[0].reason) if results else "gamma = 0 only: no hypothesis applies",
        "claims": [{"id": r.claim.id, "verdict": r.verdict.value, "reason": r.reason} for r in results],
    })


def render(out: dict) -> str:
    from theory.crh import RELATION_NAMES

    inst = out["instance"]
    lines = [f"family: crh  (MLP {inst['widths']}, {inst['activation']}, steps={inst['steps']}, lr={inst['lr']}, "
             f"batch={inst['batch_size']}, seed={inst['seed']}; {inst['mode']} covariances, {inst['metric']}; "
             f"{out['solution']['seconds']:.1f} s)"]

    def f(x):
        return "  null" if x is None else f"{x:6.3f}"
    for run in out["runs"]:
        lines.append("")
        lines.append(f"weight decay {run['weight_decay']:g}: final loss {f(run['final_loss']).strip()}"
                     + ("  DIVERGED" if run["diverged"] else ""))
        if not run["layers"]:
            continue
        lines.append("  layer  " + " ".join(f"{r:>7}" for r in RELATION_NAMES) + "   null(mean)  rank  stat.res  "
                     "PAH H_a~Z_a G_b~Z_b   top singular values")
        for L in run["layers"]:
            nm = [v for v in L["null_mean"].values() if v is not None]
            pah = L["pah"]
            sv = ", ".join(f"{s:.3g}" for s in L["singular_values"][:6])
            lines.append(f"  {L['layer']:>5}  " + " ".join(f" {f(L['alignments'][r])}" for r in RELATION_NAMES)
                         + f"   {f(sum(nm) / len(nm) if nm else None)}     {L['numerical_rank']:>4}  "
                         f"{f(L['stationarity_residual'])}  {f(pah['H_a~Z_a']['slope'])}  {f(pah['G_b~Z_b']['slope'])}"
                         f"   {sv}")
    lines.append("")
    for c in out["claims"]:
        lines.append(f"  [{c['verdict']}] {c['id']}: {c['reason']}")
    lines.append(f"verdict: {out['verdict']} ({out['reason']})")
    return "\n".join(lines)


def table(args) -> Table:
    from theory.crh import RELATION_NAMES

    gammas = sorted(set(float(g) for g in args.weight_decays))
    if not gammas:
        raise UsageError("--weight-decays must list at least one value")
    if args.null_draws < 2:
        raise UsageError(f"--null-draws must be >= 2, got {args.null_draws}")
    cfg = _config(args, gammas)
    rows = []
    from proofs_check.claims.crh import experiment

    res = experiment(cfg)
    for i, g in enumerate(cfg.weight_decays):
        if res.diverged[i]:
            rows.append([g, None] + [None] * (len(RELATION_NAMES) + 4))
            continue
        for L in _layer_rows(cfg, i, args):
            nm = [v for v in L["null_mean"].values() if v is not None]
            rows.append([g, L["layer"]] + [L["alignments"][r] for r in RELATION_NAMES] +
                        [sum(nm) / len(nm) if nm else None, L["numerical_rank"], L["stationarity_residual"],
                         L["magnitude_ratio"]])
    caption = (f"Alignment ({args.metric}, {args.mode} covariances) versus weight decay in the MLP "
               f"{list(cfg.widths)} (tanh, no bias, MSE, SGD batch {cfg.batch_size}, lr {cfg.lr:g}, {cfg.steps} steps, "
               f"matrices averaged over {cfg.n_records} checkpoints of the second half, seed {cfg.seed}). "
               f"null = mean Haar-rotation baseline over the six relations ({args.null_draws} draws); rank at 5% of "
               f"the top singular value; stat.res = ||E[g_b h_a^T] - gamma W|| / ||gamma W||; magnitude = "
               f"tr(G_b)/(gamma^2 tr(H_b)) (1 if the theorem's magnitudes held: open discrepancy).")
    cols = ["weight_decay", "layer"] + list(RELATION_NAMES) + ["null_mean", "rank", "stat_residual", "magnitude_ratio"]
    latex = [r"$\gamma$", "layer"] + [r.replace("-", "-") for r in RELATION_NAMES] + \
        ["null", "rank", "stat. res.", r"$\mathrm{tr}\,G_b/(\gamma^2\mathrm{tr}\,H_b)$"]
    return Table(cols, rows, caption, latex_columns=latex, digits=4,
                 meta={"config": cfg.to_dict(), "seconds": res.seconds})


COMMANDS = [
    SolveCommand("crh", "representation alignment (CRH/PAH): the small MLP experiment with weight decay",
                 lambda p: _common(p, table=False), solve, render),
    TableCommand("crh", "alignment of the six CRH relations versus weight decay (the paper's figure as a table)",
                 lambda p: _common(p, table=True), table),
]
