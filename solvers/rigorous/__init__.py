"""Rigorous certificates in ball arithmetic (python-flint's arb): docs/rigorous.md.

A package, one module per concern: :mod:`~solvers.rigorous.balls` (exact conversions, outward rounding, the
result type), :mod:`~solvers.rigorous.linalg` (verified linear algebra), one module per family
(:mod:`~solvers.rigorous.ufm`, :mod:`~solvers.rigorous.ufm_general`, :mod:`~solvers.rigorous.scl`,
:mod:`~solvers.rigorous.feature_collapse`, :mod:`~solvers.rigorous.regression`). Every public name (and the
private helpers the tests use) is re-exported here, so ``from solvers.rigorous import X`` keeps working;
monkeypatch a constant in the module that uses it.
"""

from __future__ import annotations

from solvers.rigorous.balls import (  # noqa: F401
    ClassSym,
    ENDPOINT_BITS,
    INSTALL_HINT,
    NotCertified,
    PRECISION_BITS,
    RigorousBound,
    Unsupported,
    _Precision,
    _Timer,
    _float_down,
    _float_up,
    _scale_down,
    _to_fraction,
    available,
    certainly_ge,
    certainly_le,
    certainly_positive,
    endpoints,
    exact,
    lower_float,
    max_ball,
    outward,
    projected_class_sym,
    require_flint,
    upper_float,
    xlogx,
)
from solvers.rigorous.linalg import (  # noqa: F401
    DENSE_MAX,
    SPECTRAL_LDL_BITS,
    SPECTRAL_RELS,
    VERIFIED_MAX,
    _spectral_upper_dense,
    _spectral_upper_verified,
    ball_matrix_float_enclosure,
    lambda_min_lower,
    ldl_positive_definite,
)
from solvers.rigorous.ufm import (  # noqa: F401
    BALANCED_SOFTMAX_LOSSES,
    balanced_phase,
    balanced_targets,
    class_sym_strict_complementarity,
    ufm_balanced_uniqueness,
    ufm_closed_form,
    ufm_from_instance,
)
from solvers.rigorous.scl import (  # noqa: F401
    SCL_ACTIVE_ENTRY,
    SCL_MINIBATCH_SOLVER_BUDGET_S,
    SCL_MINIBATCH_STARTS,
    SCL_MINIBATCH_TIGHT_RTOL,
    _scl_batch_list,
    _scl_gram_loss_balls,
    _scl_reduced_loss_balls,
    scl_from_instance,
    scl_gram_dense,
    scl_gram_feasible,
    scl_minibatch,
    scl_minibatch_of,
    scl_reduced_dense,
    scl_structured,
)
from solvers.rigorous.feature_collapse import (  # noqa: F401
    FC_CHUNK,
    FC_DENSE_MAX,
    FC_FLOAT_CHECK_RTOL,
    FC_MAX_GROUPED_SECONDS,
    FC_MAX_TERMS,
    FC_SECONDS_COLUMN_INCIDENCE,
    FC_SECONDS_DENSE_INCIDENCE,
    FC_SECONDS_PER_ENTRY,
    FC_SECONDS_PER_ENTRY_POSITION,
    _FCStructure,
    _fc_candidate,
    _fc_ce_balls,
    _fc_float_check,
    _fc_gram_upper,
    _fc_grouped_balls,
    _fc_grouped_cost,
    _fc_instance,
    _fc_lambda_min_lower,
    _fc_product_balls,
    _fc_structure,
    _fc_word_masses,
    _feature_collapse_enumerated,
    _layernorm_balls,
    _matmul_balls,
    feature_collapse_from_instance,
)
from solvers.rigorous.ufm_general import (  # noqa: F401
    BallLoss,
    UFM_GENERAL_VARIANTS,
    _ce_ball_form,
    _squared_ball_form,
    ball_form,
    ball_forms,
    ufm_general_feasible,
    ufm_general_grouped,
)
