"""Work budget and dynamics-curve spacing of the CRH experiment (:func:`solvers.crh.run_experiment`), from the
instance's sizes alone (docs/crh.md, "Budgets", "Dynamics curves"). :mod:`solvers.crh` re-exports every name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from theory import _work as budgets
from theory._validate import InstanceError, as_int

if TYPE_CHECKING:  # annotations only: theory.crh imports sympy, and the CLI's parser reads SAFETY_WALL_S from here
    from theory.crh import CRHExperiment


#: Dynamics curves of the experiment (docs/crh.md, "Dynamics curves"): the full-data training loss of
#: every run at evenly spaced step counts (0 = the initial weights and the last step included), one
#: point per LOSS_POINT_EPOCHS epochs, between MIN_CURVE_POINTS and CURVE_POINTS (<= 500 for the
#: figure); the six alignments of the last hidden layer at one point per ALIGNMENT_POINT_EPOCHS epochs,
#: between MIN_ALIGNMENT_POINTS and ALIGNMENT_POINTS. Cost (measured, default net, 2 runs): a loss point
#: is a full-data forward pass, ~0.8 ms = ~7 SGD steps; an alignment point a forward/backward pass and
#: eight second moments, ~6 ms. The spacing keeps them at ~3% + ~2% of the training time.
LOSS_POINT_EPOCHS = 3.0
ALIGNMENT_POINT_EPOCHS = 30.0
MIN_CURVE_POINTS, CURVE_POINTS = 30, 400
MIN_ALIGNMENT_POINTS, ALIGNMENT_POINTS = 5, 20


def curve_steps(steps: int, points: int) -> list[int]:
    """At most ``points`` step counts evenly spread over [0, steps], 0 and ``steps`` included."""
    return np.unique(np.linspace(0, steps, max(2, min(points, steps + 1))).round().astype(int)).tolist()


def curve_point_counts(cfg: CRHExperiment) -> tuple[int, int]:
    """(loss points, alignment points) of an experiment's dynamics curves (see LOSS_POINT_EPOCHS)."""
    epochs = cfg.steps * cfg.batch_size / cfg.n_samples
    n_loss = int(np.clip(epochs / LOSS_POINT_EPOCHS + 1, MIN_CURVE_POINTS, CURVE_POINTS))
    n_align = int(np.clip(epochs / ALIGNMENT_POINT_EPOCHS + 1, MIN_ALIGNMENT_POINTS, ALIGNMENT_POINTS))
    return min(n_loss, cfg.steps + 1), min(n_align, cfg.steps + 1)


# --------------------------------------------------------------------------------------------
# Budgets: the work of an instance, counted before doing it
# --------------------------------------------------------------------------------------------

#: Work budget (docs/crh.md, "Budgets"): an instance whose estimated work exceeds WORK_BUDGET
#: flop-equivalents is refused before any allocation; the verdict never depends on the machine's load.
#: REFERENCE_RATE is the calibrated rate of the 2-core development machine (benchmarks/crh_budget.py):
#: the budget is about WORK_BUDGET / REFERENCE_RATE = 120 s there. SAFETY_WALL_S, the wall-clock safety
#: net of the SGD loop and of L-BFGS, is 15 times that: an instance within the work budget reaches it only
#: when the machine is more than 15 times slower than at calibration, and then the result says so.
REFERENCE_RATE = 2e9
WORK_BUDGET = 120.0 * REFERENCE_RATE
TIME_BUDGET_S = WORK_BUDGET / REFERENCE_RATE  # the work budget in seconds at the reference rate
SAFETY_WALL_S = 15 * TIME_BUDGET_S
MEMORY_BUDGET_BYTES = 2.5e9

#: Cost model in flop-equivalents (calibrated on the 2-core development machine with
#: benchmarks/crh_budget.py; docs/crh.md "Budgets"): Python overhead per layer and step (about 15 us,
#: i.e. 3e4 flop-equivalents at the reference rate), the SGD products at the reference rate
#: (single-threaded BLAS), the full-data statistics of a checkpoint at twice that plus 0.2 ms per layer
#: and run, Haar null draws at the reference rate. Measured estimate/CPU-time ratios: 1.0 - 4.5.
_STEP_OVERHEAD = 15e-6 * REFERENCE_RATE
_STAT_SPEEDUP = 2.0
_STAT_OVERHEAD = 2e-4 * REFERENCE_RATE


def experiment_budget(cfg: CRHExperiment, *, null_draws: int = 0, check: bool = False) -> dict:
    """Estimated work (flop-equivalents; ``seconds`` = work / REFERENCE_RATE) and peak bytes of
    :func:`run_experiment` (and, with ``null_draws``, of the alignment reports with Haar nulls for every
    run and layer), from the sizes alone: the same instance gets the same estimate on any machine.

    With ``check=True`` raises InputError naming the estimate and the limit when it exceeds WORK_BUDGET
    or MEMORY_BUDGET_BYTES."""
    null_draws = as_int("null_draws", null_draws, minimum=0, maximum=10 ** 9)
    R, L, N, B = len(cfg.runs), cfg.n_layers, cfg.n_samples, cfg.batch_size
    w = cfg.widths
    P = sum(a * b for a, b in zip(w[:-1], w[1:]))
    sq = sum(a * a + b * b for a, b in zip(w[:-1], w[1:]))
    outer = sum(b * b * a for a, b in zip(w[:-1], w[1:]))  # D D^T of the second half
    step = L * _STEP_OVERHEAD * max(1.0, R / 2) + 6.0 * R * B * P + 4.0 * R * P + R * outer
    record = R * L * _STAT_OVERHEAD + R * N * (4.0 * P + 16.0 * sq) / _STAT_SPEEDUP
    null = R * L * 12 * null_draws * 6.0 * max(w) ** 3
    n_loss, n_align = curve_point_counts(cfg) if len(cfg.run_seeds) == 1 else (0, 0)
    curves = n_loss * (2.0 * R * N * P / _STAT_SPEEDUP + _STAT_OVERHEAD) + n_align * record
    work = cfg.steps * step + cfg.n_records * record + null + curves
    dmax = max(w)
    peak = 8.0 * (N * (w[0] + w[-1]) * 2 * len(cfg.run_seeds) + 8 * R * N * sum(w) + 6 * R * P
                  + 14 * 2 * R * L * dmax * dmax + 6 * null_draws * dmax * dmax)
    out = {"work": float(work), "work_budget": WORK_BUDGET, "reference_rate": REFERENCE_RATE,
           "seconds": float(work / REFERENCE_RATE), "bytes": float(peak), "time_limit_s": TIME_BUDGET_S,
           "safety_wall_s": SAFETY_WALL_S, "memory_limit_bytes": MEMORY_BUDGET_BYTES}
    if check:
        if not peak <= MEMORY_BUDGET_BYTES:
            raise InstanceError(f"instance too large: estimated memory {peak / 1e9:.3g} GB > limit "
                                f"{MEMORY_BUDGET_BYTES / 1e9:g} GB (n_samples={N}, widths={list(w)}, runs={R}"
                                + (f", null_draws={null_draws}" if null_draws else "") + ")")
        if not work <= WORK_BUDGET:
            raise InstanceError(
                f"instance too large (steps={cfg.steps}, runs={R}, widths={list(w)}, n_samples={N}, "
                f"records={cfg.n_records}" + (f", null_draws={null_draws}" if null_draws else "") + "): "
                + budgets.work_text(work, WORK_BUDGET, "flop-equivalents", seconds_per_unit=1.0 / REFERENCE_RATE)
                + "; reduce steps or sizes")
    return out
