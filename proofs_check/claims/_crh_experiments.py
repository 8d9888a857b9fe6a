"""CRH claims measured on the single-seed MLP experiment (reconstructed from Ziyin, Chuang, Galanti, Poggio,
ICLR 2025; docs/crh.md): alignment against weight decay, alignment level, rank drop, SGD stationarity.

Each factory takes the statement under test (direction, threshold, rank, ...) as an argument; the runs are
evidence, not proofs (docs/crh.md, "What each check compares"). ``proofs_check.claims.crh`` registers them.
"""

from __future__ import annotations

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, Verdict, condition, exceeds, fmt, hypothesis_fails,
                               is_finite, within)
from solvers import crh as S
from theory import crh as T
from theory._validate import InputError, as_int
from proofs_check.claims._crh_common import (PAPER, STATIONARY_TOL, _alignments, _cfg, _claim, _layer_index,
                                             _run_index, _stationarity_hypothesis, _training_problem, _worst,
                                             experiment, experiment_report)

#: Numerical-rank threshold (singular value / largest) for "rank drops to the task dimension".
#: In the experiment the dropped directions sit at 1e-3 - 2e-2 and the kept ones above 0.3
#: (docs/crh.md, measured here); 0.05 separates them. Ratios inside RANK_AMBIGUOUS
#: around the threshold make the rank undecidable (INCONCLUSIVE).
RANK_REL_TOL = 0.05

RANK_AMBIGUOUS = (0.02, 0.12)

#: Mean alignment gain (over the six relations) required for "alignment increases with weight
#: decay"; a gain below -MIN_GAIN contradicts the statement (REFUTED).
MIN_GAIN = 0.10

#: A measured level statement ("all six alignments >= t") is contradicted when some alignment is
#: below t - LEVEL_MARGIN (seed-to-seed spread of single alignments in the quick run is ~0.03).
LEVEL_MARGIN = 0.05

#: A measured alignment counts as above its Haar null when it exceeds null mean + NULL_Z * std.
NULL_Z = 3.0

def alignment_wd_claim(gamma_lo: float = 0.0, gamma_hi: float = 1e-2, *, layer: int = -2, direction: str = "increases",
                       cfg: T.CRHExperiment | None = None, claim_id="crh.experiment.alignment_vs_weight_decay",
                       statement=None, time_budget_s: float | None = None) -> Claim:
    """Measured: in ``layer`` (default the last hidden layer), the six alignments at gamma_hi are
    higher ("increases") or lower ("decreases") than at gamma_lo, and above their Haar null."""
    if direction not in ("increases", "decreases"):
        raise InputError(f"direction must be 'increases' or 'decreases', got {direction!r}")

    def check(ctx):
        c = _cfg(ctx, cfg)
        lo, hi = _run_index(c, gamma_lo), _run_index(c, gamma_hi)
        res = experiment(c, time_budget_s)
        name = f"alignment-{direction}"
        li = _layer_index(c, layer)
        problem = _training_problem(res, (lo, hi), name) or _stationarity_hypothesis(res, (lo, hi), name, [li])
        if problem is not None:
            yield problem
            return
        # Haar nulls only for the run the above-null check reads (the top of the stated direction)
        up = direction == "increases"
        r_lo = experiment_report(c, lo, li, null_draws=0 if up else S.NULL_DRAWS, time_budget_s=time_budget_s)
        r_hi = experiment_report(c, hi, li, null_draws=S.NULL_DRAWS if up else 0, time_budget_s=time_budget_s)
        a_lo, a_hi = _alignments(r_lo), _alignments(r_hi)
        gains = [None if not is_finite(a_hi[r], a_lo[r]) else a_hi[r] - a_lo[r] for r in T.RELATION_NAMES]
        mean_gain = float(np.mean(gains)) if all(g is not None for g in gains) else None
        sign = 1.0 if direction == "increases" else -1.0
        ev = {"layer": li + 1, "gamma_lo": gamma_lo, "gamma_hi": gamma_hi, "alignment_lo": a_lo,
              "alignment_hi": a_hi, "mean_gain": mean_gain, "threshold": MIN_GAIN, "steps": c.steps,
              "mode": "normalized, Pearson", "seconds": res.seconds}
        what = f"mean alignment gain from gamma={fmt(gamma_lo)} to {fmt(gamma_hi)}"
        if mean_gain is None:
            yield Check(name, Verdict.INCONCLUSIVE, f"{what} undefined (an alignment is undefined)", ev)
        elif within(MIN_GAIN, sign * mean_gain):
            yield Check(name, Verdict.VERIFIED, f"{what} {fmt(mean_gain, 3)} ({direction}; margin {MIN_GAIN})", ev)
        elif within(MIN_GAIN, -sign * mean_gain):
            yield Check(name, Verdict.REFUTED, f"{what} {fmt(mean_gain, 3)} contradicts '{direction}' "
                        f"(margin {MIN_GAIN})", ev)
        else:
            yield Check(name, Verdict.INCONCLUSIVE, f"{what} {fmt(mean_gain, 3)} within +-{MIN_GAIN}", ev)
        top = gamma_hi if direction == "increases" else gamma_lo
        rep_top = r_hi if direction == "increases" else r_lo
        above = {}
        for r in T.RELATION_NAMES:
            nb, a = rep_top.null[r]["pearson"], rep_top.alignments[r]["pearson"]
            above[r] = a - (nb.mean + NULL_Z * nb.std) if is_finite(a, nb.mean, nb.std) else None
        smallest = _worst([None if v is None else -v for v in above.values()])
        smallest = -smallest if is_finite(smallest) else None
        yield condition("above-null", exceeds(smallest, 0.0),
                        verified=f"all six alignments at gamma={fmt(top)} above Haar null + {NULL_Z} std "
                                 f"(smallest excess {fmt(smallest, 3)})",
                        refuted=f"an alignment at gamma={fmt(top)} is not above Haar null + {NULL_Z} std "
                                f"(smallest excess {fmt(smallest, 3)})", inconclusive=True,
                        evidence={"excess_over_null": above,
                                  "null_mean": {r: rep_top.null[r]["pearson"].mean for r in T.RELATION_NAMES}})

    return _claim(claim_id, statement or f"In the last hidden layer of the MLP experiment (docs/crh.md), the six alignments "
                  f"(per-sample-normalised centred covariances, Pearson) {direction} from weight decay "
                  f"{fmt(gamma_lo)} to {fmt(gamma_hi)} and exceed their Haar null baseline.",
                  f"{PAPER}, CRH theorem and weight-decay figure (reconstructed; docs/crh.md)",
                  Provenance.RECONSTRUCTED, check, key=("mean_gain",), tags=("experiment",))


def alignment_level_claim(gamma: float, threshold: float, *, layer: int = -2, cfg: T.CRHExperiment | None = None,
                          claim_id=None, statement=None, time_budget_s: float | None = None) -> Claim:
    """Measured level statement: all six alignments of ``layer`` at weight decay ``gamma`` are >= threshold.
    REFUTED when one is below threshold - LEVEL_MARGIN."""
    cid = claim_id or f"crh.experiment.alignment_level.g{gamma:g}"

    def check(ctx):
        c = _cfg(ctx, cfg)
        ri, li = _run_index(c, gamma), _layer_index(c, layer)
        res = experiment(c, time_budget_s)
        problem = _training_problem(res, (ri,), "alignment-level") or \
            _stationarity_hypothesis(res, (ri,), "alignment-level", [li])
        if problem is not None:
            yield problem
            return
        a = _alignments(experiment_report(c, ri, li, null_draws=0, time_budget_s=time_budget_s))  # no null read
        vals = [None if not is_finite(v) else -v for v in a.values()]
        lowest = -_worst(vals) if is_finite(_worst(vals)) else None
        ev = {"alignments": a, "threshold": threshold, "margin": LEVEL_MARGIN, "layer": li + 1, "gamma": gamma,
              "steps": c.steps}
        if lowest is None:
            yield Check("alignment-level", Verdict.INCONCLUSIVE, "an alignment is undefined", ev)
        elif within(threshold, lowest):
            yield Check("alignment-level", Verdict.VERIFIED, f"all six alignments >= {threshold}: lowest "
                        f"{fmt(lowest, 3)}", ev)
        elif exceeds(threshold - lowest, LEVEL_MARGIN):
            yield Check("alignment-level", Verdict.REFUTED,
                        f"lowest alignment {fmt(lowest, 3)} < {threshold} - {LEVEL_MARGIN}", ev)
        else:
            yield Check("alignment-level", Verdict.INCONCLUSIVE,
                        f"lowest alignment {fmt(lowest, 3)} within {LEVEL_MARGIN} below {threshold}", ev)

    return _claim(cid, statement or f"At weight decay {fmt(gamma)} all six alignments of the last hidden layer are "
                  f">= {threshold}.", f"{PAPER}, weight-decay figure (reconstructed; docs/crh.md)",
                  Provenance.RECONSTRUCTED, check, tags=("experiment",))


def rank_claim(rank: int | None = None, gamma: float = 1e-2, *, cfg: T.CRHExperiment | None = None,
               claim_id="crh.experiment.rank_drop", statement=None, time_budget_s: float | None = None) -> Claim:
    """Measured: at weight decay gamma the hidden weight matrices (W_2 .. W_{L-1}) have numerical rank
    ``rank`` (default the task rank) at relative threshold RANK_REL_TOL; at gamma = 0 they do not."""

    def check(ctx):
        c = _cfg(ctx, cfg)
        want = c.task_rank if rank is None else as_int("rank", rank, minimum=0)
        ri = _run_index(c, gamma)
        res = experiment(c, time_budget_s)
        name = f"numerical-rank-g{fmt(gamma)}"
        problem = _training_problem(res, (ri,), name) or \
            _stationarity_hypothesis(res, (ri,), name, range(1, c.n_layers - 1))
        if problem is not None:
            yield problem
            return
        ranks, ratios = {}, {}
        ambiguous, undefined = [], []
        for l in range(1, c.n_layers - 1):
            sv = np.linalg.svd(res.W_mean[ri][l], compute_uv=False)
            if not (np.all(np.isfinite(sv)) and sv[0] > 0):
                undefined.append(f"W{l + 1}")
                continue
            rel = sv / sv[0]
            ranks[f"W{l + 1}"] = int(np.sum(rel > RANK_REL_TOL))
            ratios[f"W{l + 1}"] = rel[: want + 2].tolist()
            if np.any((rel > RANK_AMBIGUOUS[0]) & (rel < RANK_AMBIGUOUS[1])):
                ambiguous.append(f"W{l + 1}")
        ev = {"ranks": ranks, "relative_singular_values": ratios, "claimed_rank": want, "gamma": gamma,
              "threshold": RANK_REL_TOL, "ambiguous_band": list(RANK_AMBIGUOUS)}
        if undefined or not ranks:
            yield Check(name, Verdict.INCONCLUSIVE, f"numerical rank undefined for {undefined or 'every layer'} "
                        "(zero or non-finite weights)", ev)
        elif all(r == want for r in ranks.values()):
            yield Check(name, Verdict.VERIFIED, f"numerical ranks {ranks} = {want} at gamma={fmt(gamma)}", ev)
        elif ambiguous:
            yield Check(name, Verdict.INCONCLUSIVE,
                        f"ranks {ranks}; singular values in the ambiguous band {RANK_AMBIGUOUS} for {ambiguous}", ev)
        else:
            yield Check(name, Verdict.REFUTED, f"numerical ranks {ranks} != {want} at gamma={fmt(gamma)}", ev)

    return _claim(claim_id, statement or f"With weight decay {fmt(gamma)} the hidden weight matrices of the MLP experiment "
                  "drop to the task's dimension (numerical rank = task rank).",
                  f"{PAPER}, experiments (reconstructed; docs/crh.md)", Provenance.RECONSTRUCTED, check,
                  key=("ranks",), tags=("experiment",))


def magnitude_ratio(res: S.ExperimentResult, run: int, layer: int) -> float | None:
    """tr(G_b) / (gamma^2 tr(H_b)) from raw second moments (1 if the theorem's magnitudes held).
    Evaluated as (tr G_b / tr H_b) / gamma / gamma so that a small gamma does not underflow."""
    g = res.gamma(run)
    M = res.layer(run, layer, "raw")
    if g == 0 or M is None or res.diverged[run]:
        return None
    tg, th = float(np.trace(M.G_b)), float(np.trace(M.H_b))
    if not (is_finite(tg, th) and th > 0):
        return None
    out = tg / th / g / g
    return out if is_finite(out) else None


def stationarity_sgd_claim(gamma: float = 1e-2, stationary: bool = True, *, cfg: T.CRHExperiment | None = None,
                           claim_id="crh.experiment.stationarity", statement=None,
                           time_budget_s: float | None = None) -> Claim:
    """Measured: time-averaged SGD weights are stationary in the mean: ||E[g_b h_a^T] - gamma W|| / ||gamma W||
    below STATIONARY_TOL in every layer (the theorem's hypothesis holds in the experiment). A residual above it is
    no witness (training longer may reach it): INCONCLUSIVE. ``stationary=False`` states the opposite (SGD does
    not reach the stationary mean within STATIONARY_TOL in this experiment): REFUTED by the measured run whose
    residual is within it in every layer (the run is the witness)."""

    def check(ctx):
        c = _cfg(ctx, cfg)
        ri = _run_index(c, gamma)
        if gamma == 0:
            yield hypothesis_fails("stationarity-residual", "weight decay gamma > 0 (the residual is relative to "
                                   "gamma W)", {"gamma": gamma})
            return
        res = experiment(c, time_budget_s)
        problem = _training_problem(res, (ri,), "stationarity-residual")
        if problem is not None:
            yield problem
            return
        stat = {f"layer {l + 1}": res.stationarity_residual(ri, l) for l in range(c.n_layers)}
        worst_res = _worst(stat.values())
        reached = within(worst_res, STATIONARY_TOL)
        ev = {"residuals": stat, "max_residual": worst_res if is_finite(worst_res) else None,
              "threshold": STATIONARY_TOL, "gamma": gamma, "steps": c.steps, "claimed_stationary": stationary}
        if stationary:
            yield condition("stationarity-residual", reached,
                            verified=f"max residual {fmt(worst_res, 3)} <= {STATIONARY_TOL}",
                            refuted=f"max residual {fmt(worst_res, 3)} > {STATIONARY_TOL}: weights not stationary "
                                    "(hypothesis of the theorem fails)" if is_finite(worst_res) else
                                    "residual undefined (zero weights)", inconclusive=True, evidence=ev)
        elif reached:
            yield Check("stationarity-residual", Verdict.REFUTED,
                        f"claimed not stationary, but the run at weight decay {fmt(gamma)} has max residual "
                        f"{fmt(worst_res, 3)} <= {STATIONARY_TOL} in every layer (witness: the residuals per layer)", ev)
        else:
            yield Check("stationarity-residual", Verdict.INCONCLUSIVE,
                        f"max residual {fmt(worst_res, 3)} > {STATIONARY_TOL} in this run" if is_finite(worst_res) else
                        "residual undefined (zero weights)", ev)

    return _claim(claim_id, statement or f"With weight decay {fmt(gamma)}, SGD in the MLP experiment "
                  + ("reaches" if stationary else "does not reach") + " mean "
                  "stationarity: the time-averaged E[g_b h_a^T] equals gamma W within 25% in every layer.",
                  f"{PAPER}, stationarity hypothesis of the CRH theorem (reconstructed; docs/crh.md)",
                  Provenance.RECONSTRUCTED, check, key=("max_residual",), tags=("experiment",))
