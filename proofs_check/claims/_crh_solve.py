"""The CRH solve path (``ncproofs solve crh``): one instance of the MLP experiment -> SolveReport, with the
per-layer rows, dynamics curves and option checks the CLI (proofs_check.families.crh) uses.
"""

from __future__ import annotations

import math

import numpy as np

from proofs_check.core import Check, Verdict, is_finite
from solvers import crh as S
from theory import crh as T
from theory._validate import InputError, as_int
from proofs_check.claims._crh_common import experiment, experiment_report
from proofs_check.claims._crh_experiments import RANK_REL_TOL, magnitude_ratio

# --------------------------------------------------------------------------------------------
# The solve path: one instance of the experiment -> SolveReport
# --------------------------------------------------------------------------------------------

METRICS = ("pearson", "cosine")
#: Haar rotations for the null baselines of `solve`: at least 2 (a standard deviation), at most
#: solvers.crh.MAX_NULL_DRAWS (memory: six stacks of draws x d x d floats).
MAX_NULL_DRAWS = S.MAX_NULL_DRAWS


def _layer_rows(cfg, run, mode, metric, null_draws, time_budget_s):
    res = experiment(cfg, time_budget_s)
    out = []
    for l in range(cfg.n_layers):
        rep = experiment_report(cfg, run, l, mode, null_draws, time_budget_s)
        if rep is None:
            out.append({"layer": l + 1, "shape": list(res.W_final[run][l].shape), "alignments": None})
            continue
        sv = np.linalg.svd(res.W_mean[run][l], compute_uv=False)
        rank = int(np.sum(sv / sv[0] > RANK_REL_TOL)) if np.all(np.isfinite(sv)) and sv[0] > 0 else None
        out.append({
            "layer": l + 1, "shape": list(res.W_mean[run][l].shape),
            "alignments": {r: rep.alignments[r][metric] for r in T.RELATION_NAMES},
            "null_mean": {r: rep.null[r][metric].mean if rep.null else None for r in T.RELATION_NAMES},
            "null_std": {r: rep.null[r][metric].std if rep.null else None for r in T.RELATION_NAMES},
            "all_metrics": rep.alignments,
            "pah": {k: v.to_dict() for k, v in rep.pah.items()},
            "singular_values": sv.tolist(),
            "numerical_rank": rank,
            "stationarity_residual": res.stationarity_residual(run, l),
            "magnitude_ratio": magnitude_ratio(res, run, l),
            "cauchy_schwarz_bound": _cs_bound(res, run, l),
        })
    return out


def _cs_bound(res: S.ExperimentResult, run: int, layer: int) -> float | None:
    """(tr E[g_b h_b^T] / (gamma tr H_b))^2: the exact Cauchy-Schwarz lower bound of the magnitude ratio."""
    g = res.gamma(run)
    M = res.layer(run, layer, "raw")
    if g == 0 or M is None or res.diverged[run] or res.first_moment is None:
        return None
    th = float(np.trace(M.H_b))
    if not th > 0:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.float64(np.trace(res.first_moment[run][layer])) / th / g
        out = float(q * q)
    return out if is_finite(out) else None


def _finite_or_none(values) -> list:
    return [float(v) if v is not None and math.isfinite(v) else None for v in values]


def _mean_alignment(series: dict) -> list:
    """Mean of the six relations per point (None where one is undefined)."""
    cols = list(zip(*series.values()))
    return [float(np.mean(c)) if all(math.isfinite(v) for v in c) else None for c in cols]


def _run_dynamics(cfg: T.CRHExperiment, res: S.ExperimentResult, run: int, mode: str, metric: str) -> dict:
    """Per run: the full-data training loss of the initial weights and of the weights training ended with
    (each recomputed here from the weights: the first and last points of the loss curve must match them),
    and the six alignments of the last hidden layer along training (:class:`solvers.crh.Dynamics`)."""
    X, Y, W0, _ = S.make_task(cfg)
    with np.errstate(over="ignore", invalid="ignore"):
        first = S.forward_backward(W0, X, Y, cfg.activation)[2]
        last = S.forward_backward(res.W_final[run], X, Y, cfg.activation)[2]
    dyn = res.dynamics
    out = {"initial_loss": _finite_or_none([first])[0], "last_loss": _finite_or_none([last])[0]}
    if dyn is not None and dyn.alignment_steps:
        out["alignment_curves"] = {"layer": dyn.alignment_layer + 1, "mode": mode, "metric": metric,
                                   "steps": list(dyn.alignment_steps),
                                   "alignments": {r: _finite_or_none(v) for r, v in
                                                  dyn.alignment_series(run, mode, metric).items()}}
    return out


def dynamics_curves(res: S.ExperimentResult, mode: str = "normalized", metric: str = "pearson") -> dict:
    """The report's ``curves`` (drawn by ``--plot``): per weight decay the full-data training loss at the
    recorded steps, and the mean of the six alignments (``mode``/``metric``) of the last hidden layer at
    the alignment checkpoints (matrices of the current weights, not the time averages of ``runs``).
    x = SGD steps done (0 = initial weights). Non-finite values are None. Data only."""
    dyn = res.dynamics
    if dyn is None or not dyn.steps:
        return {}
    L = dyn.loss_array()
    curves = {}
    for r, g in enumerate(res.config.weight_decays):
        curves[f"loss, gamma={g:g}"] = {"x": list(dyn.steps), "y": _finite_or_none(L[:, r]), "x_label": "SGD step",
                                        "description": "training loss mean_i ||f(x_i) - y_i||^2/2 on the full data"}
    for r, g in enumerate(res.config.weight_decays):
        if dyn.alignment_steps:
            curves[f"mean alignment, layer {dyn.alignment_layer + 1}, gamma={g:g}"] = {
                "x": list(dyn.alignment_steps), "y": _mean_alignment(dyn.alignment_series(r, mode, metric)),
                "x_label": "SGD step",
                "description": f"mean of the six alignments ({mode} covariances, {metric}) of the current weights"}
    return curves


def validate_solve_options(cfg, mode: str, metric: str, null_draws: int) -> int:
    """Checks the options of :func:`check_instance` and the budget; returns null_draws as an int."""
    if not isinstance(cfg, T.CRHExperiment):
        raise InputError(f"instance must be a theory.crh.CRHExperiment, got {type(cfg).__name__}")
    if mode not in S.MODES:
        raise InputError(f"mode must be one of {', '.join(S.MODES)}, got {mode!r}")
    if metric not in METRICS:
        raise InputError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    null_draws = as_int("null_draws", null_draws, minimum=2, maximum=MAX_NULL_DRAWS)
    S.experiment_budget(cfg, null_draws=null_draws, check=True)
    return null_draws


def _as_check(result, name: str) -> Check:
    """A claim's result as one statement of a SolveReport (its checks go into the evidence)."""
    indep = any(c.independent and c.verdict is Verdict.VERIFIED for c in result.checks) or \
        result.verdict is not Verdict.VERIFIED
    return Check(name, result.verdict, result.reason,
                 {"claim": result.claim.id, "checks": [c.to_dict() for c in result.checks]}, indep)


def _initial_alignments(cfg: T.CRHExperiment, res: S.ExperimentResult, run: int, mode: str, metric: str) -> dict | None:
    """The six alignments of the last hidden layer at the initial weights (compare with the run's layer row:
    in lazy training, ``--init-scale`` large, the representation-weight ones do not move)."""
    if res.W_init is None:
        return None
    li = (-2) % cfg.n_layers
    X, Y, W0, _ = S.make_tasks(cfg)[cfg.run_seeds.index(cfg.runs[run][0])]
    with np.errstate(over="ignore", invalid="ignore"):
        hs, gbs, _ = S.forward_backward(W0, X, Y, cfg.activation)
    if not (np.all(np.isfinite(hs[li])) and np.all(np.isfinite(gbs[li]))):
        return None
    rep = S.alignment_report(W0[li], hs[li], gbs[li], mode=mode, null_draws=0)
    return {"layer": li + 1, "alignments": {r: rep.alignments[r][metric] for r in T.RELATION_NAMES}}


def _weight_change(res: S.ExperimentResult, run: int) -> float | None:
    """Largest relative weight change ||W_final - W_0|| / ||W_0|| over the layers (lazy: small)."""
    if res.W_init is None or res.diverged[run]:
        return None
    out = max(float(np.linalg.norm(Wf - W0) / np.linalg.norm(W0)) for Wf, W0 in zip(res.W_final[run], res.W_init[run]))
    return out if is_finite(out) else None
