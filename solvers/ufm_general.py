"""The unconstrained-features model with any convex loss, any class sizes, and regression (docs/ufm_general.md).

The public API of the any-loss engine. :func:`solve` is its one entry point: given an instance it plans the
routes, finds the candidate, certifies its value and the geometry of the minimiser, and returns everything in a
:class:`GeneralSolution` (numbers and evidence, never verdicts; ``proofs_check.claims.ufm_general.check_general``
states the statements and judges them). The parts, re-exported here so that ``solvers.ufm_general.X`` names all
of them:

- :mod:`solvers.ufm_general_core`: the instance (:class:`GeneralUFM`), its values, the class-reduced factored
  solver, the dual certificate, the uniqueness conditions and the geometry at a point, the closed forms;
- :mod:`solvers.ufm_general_grouped`: grouping exchangeable classes (solver, certificate, geometry, the dual
  margin of minority collapse);
- :mod:`solvers.ufm_general_geometry`: the geometry certificate (a proven enclosure of every minimiser).
"""

from __future__ import annotations

from solvers.common import Certificate, Solution  # noqa: F401
from solvers.ufm_general_core import (  # noqa: F401
    EXPAND_MAX, FACE_TOL, FACTORED_EVALS_PER_START, FLOPS_PER_SECOND, GROUPED_EVAL_OVERHEAD, GROUPED_EVALS,
    GROUPED_EVALS_PER_START, GROUPED_FLOPS_M3, LAMBDA_MAX, LAMBDA_MIN, MAX_ENTRIES, MAX_GROUPED_CLASSES,
    MSE_CLOSED_FORM_MAX, RANK_RTOL, RANK_VALUE_RTOL, SAFETY_MESSAGE, SPECTRAL_SLACK, SPECTRAL_TOL, STRUCTURE_TOL,
    UNIT_ROUNDOFF, WALL_SAFETY_S, GeneralUFM, _cos, _gram_sqrts, _small_blas, certificate, class_layout,
    classification, clean_candidate, conjugate_columns, conjugate_slots, convex_value, data_term, estimate, geometry,
    mse_imbalanced_closed_form, polish_bias, regression_closed_form, repair_columns, repair_slots, solve_factored,
    spectral_slack, spectral_upper, truncate, uniqueness_conditions)
from solvers.ufm_general_geometry import (  # noqa: F401
    E_MINUS_1, GEOMETRY_FLOAT_FACTOR, TAU_MAX, _interval_cos, dual_columns, dual_columns_grouped,
    geometry_enclosure, is_finite_pair, minimiser_enclosure, structural_uniqueness)
from solvers.ufm_general_grouped import (  # noqa: F401
    FLAT_RTOL, RANK_SLACK, ROUND_ITERATIONS, STALL_FACTOR, STALL_MAX_RTOL, STALL_ROUNDS, TARGET_GAP_RTOL,
    GroupedPoint, _grouped_fun, certificate_grouped, clean_grouped, collapse_margin, geometry_grouped,
    grouped_full, grouped_value, invariant_to_full, minority_deviation, polish_bias_grouped, slot_logits,
    solve_grouped)
