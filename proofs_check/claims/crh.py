"""Representation alignment (CRH/PAH) claims: exact identities (derived, machine precision) and the
paper's hypotheses (reconstructed, measured against Haar null baselines).

Source of the hypotheses: Ziyin, Chuang, Galanti, Poggio, "Formation of Representations in Neural
Networks", ICLR 2025 (arXiv 2410.03006). The paper's body text was not available: the identities
below are derived in this project, and the paper's theorems are reconstructed statements
(docs/crh.md). Every claim is built by a factory that takes the statement under test as an
argument, so tests can feed a false statement and see it REFUTED.

Independence (docs/crh.md, "What each check compares"): every VERIFIED claim has at least one
check against a separate computation (a sympy proof, finite differences instead of
backpropagation, an independent formula evaluated at random points, an SGD measurement against a
stated threshold). Checks that restate what the same computation produced are marked
``independent=False``.

The claims live in four modules by concern, and this module registers them (``CLAIMS``) and re-exports
every name of them, so ``from proofs_check.claims import crh as C; C.<name>`` keeps working:

- ``_crh_common``: family names, shared tolerances, the symbolic-check helper, the cached SGD experiment;
- ``_crh_identities``: exact identities, the PAH exponent table, NC at the last layer, reparametrisation,
  inverse powers and linear regression;
- ``_crh_experiments``: the single-seed MLP experiment's measured hypotheses;
- ``_crh_magnitude``: the multi-seed claims (magnitudes, layers, lazy training, neuron noise);
- ``_crh_solve``: the solve path.

``check_instance`` is the solve path (``ncproofs solve crh``): it validates the instance, refuses
what exceeds the time/memory budget, trains with a wall-clock budget and returns a SolveReport.
"""

from __future__ import annotations

from proofs_check.claims._crh_common import (_alignments, _cfg, _claim, _concretise, DERIVED_SRC, EXP_FULL, EXP_QUICK,
                                             experiment, experiment_report, FAMILY, kebab, _layer_index, PAPER,
                                             _random_W, _rel_err, _rng, _run_index, _shapes, _stationarity_hypothesis,
                                             STATIONARY_TOL, _substitutions, symbolic_checks, _training_problem,
                                             _worst)  # noqa: F401 (re-exported)
from proofs_check.claims._crh_identities import (backprop_claim, BALANCE_ATOL, balance_claim, BALANCE_STEP, CRIT_FULL,
                                                 CRIT_GAMMA, CRIT_GRAD_ACCEPT, CRIT_QUICK, _critical,
                                                 exponent_table_claim, FD_ALIGN_TOL, FD_ATOL, _hidden_inputs,
                                                 IDENTITY_RTOL, isotropy_claim, linreg_claim, LINREG_TOL,
                                                 nc_breaking_claim, nc_claim, NC_DROP_MIN, nc_layer, _nfa,
                                                 NFA_CHANGE_MIN, nfa_changes_claim, one_step_claim,
                                                 _regression_instance, reparam_claim, _reparam_setup,
                                                 scaled_projector_claim, stationarity_claim, transfer_claim,
                                                 transfer_inverse_claim, _true_compensation, UNIT_ALIGNMENT_TOL)  # noqa: F401
from proofs_check.claims._crh_experiments import (alignment_level_claim, alignment_wd_claim, LEVEL_MARGIN,
                                                  magnitude_ratio, MIN_GAIN, NULL_Z, RANK_AMBIGUOUS, rank_claim,
                                                  RANK_REL_TOL, stationarity_sgd_claim)  # noqa: F401
from proofs_check.claims._crh_magnitude import (cauchy_schwarz_claim, COLLAPSE_REL, _collapsed, CS_MARGIN, cs_stats,
                                                _excess_over_null, EXP_CONFIDENCE, EXP_MARGIN, first_moment_claim,
                                                first_moment_stats, FM_MARGIN, gamma_exponent_claim, _kappa,
                                                later_better_claim, LAYER_MARGIN, LAYER_NULL_DRAWS, LAZY_CHANGE_MAX,
                                                lazy_claim, LAZY_FORCED, LAZY_FULL, LAZY_LOSS_DROP, LAZY_MOVE_MAX,
                                                LAZY_QUICK, _lazy_rows, LAZY_RWA_CHANGE, LAZY_SCALE, LAZY_UNCHANGED,
                                                _mag_cfg, MAG_FULL, MAG_QUICK, _magnitude_hypothesis, MIN_SEEDS,
                                                MS_NULL_DRAWS, _ms_problem, _need_seeds, noise_claim, NOISE_FULL,
                                                NOISE_GAMMA, NOISE_MC_DRAWS, NOISE_MC_TOL, NOISE_QUICK, NOISE_SIGMA,
                                                NULL_MARGIN, _seed_test, _slope, _spread, _t_interval)  # noqa: F401
from proofs_check.claims._crh_solve import (_as_check, _cs_bound, dynamics_curves, _finite_or_none,
                                            _initial_alignments, _layer_rows, MAX_NULL_DRAWS, _mean_alignment,
                                            METRICS, _run_dynamics, validate_solve_options, _weight_change)  # noqa: F401
from proofs_check.core import Claim, SolveReport, hypothesis_fails, is_finite
from solvers import crh as S
from theory import crh as T
from theory._validate import InputError


def check_instance(cfg: T.CRHExperiment, *, mode: str = "normalized", metric: str = "pearson",
                   null_draws: int = S.NULL_DRAWS, time_budget_s: float | None = None) -> SolveReport:
    """Run the MLP experiment ``cfg`` (one SGD run per weight decay) and check the measured CRH
    statements for every positive weight decay against the gamma = 0 baseline (which must be among
    ``cfg.weight_decays``): alignment increases and exceeds the Haar null, the hidden weights drop
    to the task rank, and SGD reaches mean stationarity (the magnitude ratio and its Cauchy-Schwarz
    bound are reported per layer in ``runs``; the magnitude statements are the multi-seed claims).

    Bad options raise InputError; an instance whose estimated time or memory exceeds the budget
    (solvers.crh.experiment_budget) is refused before any work; training stops at the wall-clock
    safety limit and every statement that needed it is then INCONCLUSIVE ("stopped by the wall-clock safety
    limit ...; the work budget was not reached").

    Returns a :class:`proofs_check.core.SolveReport` (``to_dict()`` is the ``ncproofs solve --json``
    schema). Raises ``theory._validate.InputError`` (a ValueError) for bad options (e.g. no gamma = 0
    baseline) or an experiment above the budget; any other exception is a defect."""
    null_draws = validate_solve_options(cfg, mode, metric, null_draws)
    if 0.0 not in cfg.weight_decays:
        raise InputError(f"weight_decays must include 0 (the baseline), got {list(cfg.weight_decays)}")
    res = experiment(cfg, time_budget_s)
    runs = [{"weight_decay": g, "final_loss": res.loss[i], "diverged": res.diverged[i],
             "weight_change": _weight_change(res, i),
             "initial_alignments": _initial_alignments(cfg, res, i, mode, metric),
             "layers": _layer_rows(cfg, i, mode, metric, null_draws, time_budget_s) if not res.diverged[i] else None}
            for i, g in enumerate(cfg.weight_decays)]
    claims = []
    for g in cfg.weight_decays:
        if g == 0:
            continue
        for name, claim in ((f"alignment-vs-weight-decay[{g:g}]", alignment_wd_claim(0.0, g, cfg=cfg, time_budget_s=time_budget_s)),
                            (f"rank-drop[{g:g}]", rank_claim(gamma=g, cfg=cfg, time_budget_s=time_budget_s)),
                            (f"stationarity[{g:g}]", stationarity_sgd_claim(g, cfg=cfg, time_budget_s=time_budget_s))):
            claims.append(_as_check(claim.run(), name))
    if not claims:
        claims.append(hypothesis_fails("weight-decay", "a positive weight decay (only gamma = 0 was given; every "
                                       "statement is about gamma > 0)"))
    diagnostics = []
    if res.budget_reached:
        diagnostics.append(res.budget_message)
    diverged = [g for g, d in zip(cfg.weight_decays, res.diverged) if d]
    if diverged:
        diagnostics.append(f"runs diverged (non-finite weights) at weight decays {diverged}")
    finite_losses = [x for x in res.loss if is_finite(x)]
    curves = dynamics_curves(res, mode, metric)
    for i, row in enumerate(runs):
        row.update(_run_dynamics(cfg, res, i, mode, metric))
    return SolveReport(
        family=FAMILY,
        instance=cfg.to_dict() | {"mode": mode, "metric": metric, "null_draws": null_draws},
        predicted={"value": None, "geometry": None,
                   "statement": "alignment increases with weight decay in the last hidden layer; hidden weights "
                                "drop to the task rank; SGD reaches mean stationarity (magnitudes: the multi-seed "
                                "crh.magnitude.* claims; per-layer ratio and Cauchy-Schwarz bound in runs)"},
        solution={"value": min(finite_losses) if finite_losses else None,
                  "method": "SGD with weight decay (numpy, runs vectorised)",
                  "converged": not any(res.diverged) and not res.budget_reached, "seconds": res.seconds,
                  "steps_done": res.steps_done, "budget_reached": res.budget_reached},
        certificate=None,
        geometry={},
        claims=claims,
        routes={"sgd": {"steps_done": res.steps_done, "checkpoints": res.n_recorded,
                        "time_budget_s": res.time_budget_s, "estimate": S.experiment_budget(cfg, null_draws=null_draws)}},
        diagnostics=diagnostics,
        # "curves": data for the dynamics figure (plots.py), not evidence: no statement reads it
        extra={"runs": runs, "curves": curves},
        seconds=res.seconds,
    )


CLAIMS: list[Claim] = [
    backprop_claim(),
    transfer_claim(),
    scaled_projector_claim(),
    isotropy_claim(),
    one_step_claim(),
    stationarity_claim(),
    balance_claim(),
    exponent_table_claim(),
    nc_claim(),
    nc_breaking_claim(),
    reparam_claim(),
    nfa_changes_claim(),
    alignment_wd_claim(),
    alignment_level_claim(1e-2, 0.8, claim_id="crh.experiment.alignment_level",
                          statement="At weight decay 1e-2 all six alignments of the last hidden layer are >= 0.8 "
                                    "(docs/crh.md: about 0.86-0.99 with 2e5 steps)."),
    rank_claim(),
    stationarity_sgd_claim(),
    first_moment_claim(),
    cauchy_schwarz_claim(),
    gamma_exponent_claim(),
    gamma_exponent_claim(corrected=True),
    later_better_claim(),
    lazy_claim(),
    lazy_claim(forced=LAZY_FORCED, unchanged=LAZY_UNCHANGED, max_change=LAZY_RWA_CHANGE),
    noise_claim(),
    transfer_inverse_claim(),
    linreg_claim(),
    linreg_claim("corrected"),
]
