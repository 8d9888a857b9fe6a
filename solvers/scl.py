"""Supervised contrastive loss: the SCL engine of ``ncproofs`` (docs/scl.md). One import path for every piece:

- :mod:`solvers.scl_batching`: the batching compiled for vectorised evaluation, the loss and its gradient
  (defined once, any batching);
- :mod:`solvers.scl_factored`: the factored search on the sphere (UFM) / sphere x nonnegative orthant (UFM+);
- :mod:`solvers.scl_dual`: proven lower bounds and geometry certificates on the Gram matrix (repaired dual
  points, the closed-form dual points at the collapsed ETF / OF, growth radii, the collapsed candidate);
- :mod:`solvers.scl_reduced`: the convex Gram relaxations (conic, N x N and class-reduced k x k) and the
  class-reduced dual bound at candidate class matrices;
- :mod:`solvers.scl_engine`: :func:`solve_instance`, the one entry point that walks an instance through them
  (certificate first) and returns the point or the certified predicted configuration, its certificate, the
  geometry evidence and the routes tried with why.

Every name of those modules is re-exported here (``from solvers import scl as S; S.scl_loss(...)``).
Solvers return data (``solvers.common.Solution`` / ``Certificate`` / the engine's result), never verdicts.
"""

from __future__ import annotations

from solvers.common import Certificate, Solution  # noqa: F401
from solvers.scl_batching import (  # noqa: F401
    BatchGroup,
    CompiledBatching,
    compile_batching,
    _as_compiled,
    _group_terms,
    _loss_features,
    _loss_gram,
    scl_loss,
)
from solvers.scl_factored import (  # noqa: F401
    FACTORED_GTOL,
    KKT_TOL,
    HOP_SIZE,
    HOP_SIZE_NONNEG,
    _features_from_params,
    _param_grad,
    kkt_residual,
    FACTORED_GTOL_FLOAT32,
    FACTORED_FTOL,
    FACTORED_MEMORY,
    initial_params,
    solve_factored,
    _TargetReached,
    _Deadline,
    _lbfgs_numpy,
    _torch_evaluator,
    _torch_groups,
    torch_loss,
    torch_features,
    _lbfgs_torch,
    MAX_EXHAUSTIVE_LINE,
    _solve_line,
)
from solvers.scl_dual import (  # noqa: F401
    EPS,
    ROUND_SAFETY,
    ACTIVE_ENTRY,
    _eig_error,
    loss_rounding,
    GROWTH_RHOS,
    etf_face_growth,
    _growth_solve,
    etf_face_radius,
    GramCertificate,
    face_projector,
    gram_certificate,
    _etf_closed_form_scalars,
    etf_closed_form_certificate,
    of_closed_form_certificate,
    low_rank_gap,
    etf_closed_form_dual_matrices,
    CANDIDATE_RANK_RTOL,
    CANDIDATE_NEWTON_STEPS,
    CANDIDATE_RHOS,
    CANDIDATE_GAMMAS,
    collapsed_loss,
    _collapsed_value_grad,
    polish_collapsed_candidate,
    collapsed_growth_radius,
    collapsed_certificate,
)
from solvers.scl_reduced import (  # noqa: F401
    MAX_CERTIFICATE_SAMPLES,
    REDUCED_CONIC_MAX_CLASSES,
    GramRelaxation,
    gram_relaxation,
    class_reduced_relaxation,
    class_matrix,
    reduced_loss,
    ACTIVE_COSINE,
    class_reduced_dual,
    reduced_candidates,
    as_int_tuple_counts,
    certify,
    class_mean_gram,
)
from theory._validate import InstanceError, as_finite_array, as_float, as_int, as_labels  # noqa: F401
from theory.scl import SCLInstance, validate_batches, validate_tau  # noqa: F401
