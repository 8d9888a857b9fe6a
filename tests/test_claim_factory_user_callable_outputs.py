"""Claim factories fed a user's prediction callable that raises, or returns inf, NaN or a plain number where a
formula is documented: never VERIFIED, a NaN never passes (no witness either), the user's own exception is
reported as that exception (verdict ERROR naming it), and a plain number is judged, not an internal crash.

Found: `make_trivial_phase_claim(threshold=lambda s: 0.19245)` (a float instead of a sympy formula) ended in
ERROR "AttributeError: 'float' object has no attribute 'subs'" (a package defect reported for a usable input),
and with a NaN threshold `symbolic_zero` said "numerically zero at the test points" (NaN > 1e-9 is False)."""

from __future__ import annotations

import pytest
import sympy as sp

from proofs_check.claims import deep_ufm as DC
from proofs_check.claims import feature_collapse as FC
from proofs_check.claims import scl as SC
from proofs_check.claims import ufm_general as UG
from proofs_check.core import RunContext, Verdict, symbolic_zero

CTX = RunContext()
INF, NAN = float("inf"), float("nan")


class UserBug(Exception):
    pass


def _boom(*a, **k):
    raise UserBug("the user's prediction is broken")


RAISING = {
    "ufm_general.label-smoothing": lambda: UG.make_ls_value_claim(predict=_boom),
    "ufm_general.regression": lambda: UG.make_regression_value_claim(predict=_boom),
    "ufm_general.imbalanced-mse": lambda: UG.make_imbalanced_mse_value_claim(predict=_boom),
    "scl.theorem1": lambda: SC.make_theorem1_claim(bound=_boom),
    "scl.tau-limits": lambda: SC.make_tau_limits_claim(limits=_boom),
    "scl.relu-cost": lambda: SC.make_relu_cost_claim(cost=_boom),
    "scl.uniqueness": lambda: SC.make_uniqueness_claim(predict=_boom),
    "deep_ufm.linear-value": lambda: DC.make_linear_optimum_claim(predict_value=_boom),
    "deep_ufm.linear-rank": lambda: DC.make_linear_optimum_claim(predict_rank=_boom),
    "deep_ufm.ce-bound": lambda: DC.make_ce_claim(bound=_boom),
}

NONFINITE = {
    "ufm_general.label-smoothing+inf": lambda: UG.make_ls_value_claim(predict=lambda *a, **k: INF),
    "ufm_general.label-smoothing-inf": lambda: UG.make_ls_value_claim(predict=lambda *a, **k: -INF),
    "ufm_general.regression+inf": lambda: UG.make_regression_value_claim(predict=lambda *a: INF),
    "ufm_general.imbalanced-mse-inf": lambda: UG.make_imbalanced_mse_value_claim(predict=lambda *a, **k: -INF),
    "scl.theorem1-inf": lambda: SC.make_theorem1_claim(bound=lambda *a: -INF),
    "scl.tau-limits-inf": lambda: SC.make_tau_limits_claim(limits=lambda *a: (INF, INF)),
    "scl.tau-limits-nan": lambda: SC.make_tau_limits_claim(limits=lambda *a: (NAN, NAN)),
    "scl.relu-cost+inf": lambda: SC.make_relu_cost_claim(cost=lambda *a, **k: INF),
    "scl.graf+inf": lambda: SC.make_graf_claim(value=lambda *a, **k: INF),
    "deep_ufm.linear-value+inf": lambda: DC.make_linear_optimum_claim(predict_value=lambda i: INF),
    "deep_ufm.ce-bound-inf": lambda: DC.make_ce_claim(bound=lambda i, tau: -INF),
    "feature_collapse.trivial-phase+inf": lambda: FC.make_trivial_phase_claim(threshold=lambda s: INF),
    "feature_collapse.trivial-phase-nan": lambda: FC.make_trivial_phase_claim(threshold=lambda s: NAN),
}


@pytest.mark.parametrize("name", sorted(RAISING))
def test_a_raising_user_callable_is_reported_as_its_own_error(name):
    res = RAISING[name]().run(CTX)
    assert res.verdict is Verdict.ERROR, (name, res.verdict, res.reason)
    assert "UserBug" in res.reason and "the user's prediction is broken" in res.reason, res.reason


@pytest.mark.parametrize("name", sorted(NONFINITE))
def test_a_non_finite_prediction_is_never_verified(name):
    res = NONFINITE[name]().run(CTX)
    assert res.verdict is not Verdict.VERIFIED, (name, res.reason)
    assert res.verdict is not Verdict.ERROR, (name, res.reason)  # judged, not a crash
    if name.endswith("nan"):
        assert res.verdict is not Verdict.REFUTED, (name, res.reason)  # a NaN is no witness


def test_trivial_phase_plain_float_threshold_is_judged():
    # 0.19245 is a number (one instance's critical lambda in make_constants_claim's rows), not the formula: a
    # constant is false as a threshold for every instance, so the symbolic check phi'(0) = 0 refutes it
    res = FC.make_trivial_phase_claim(threshold=lambda s: 0.19245).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    assert "AttributeError" not in res.reason


def test_trivial_phase_nan_threshold_is_not_called_numerically_zero():
    res = FC.make_trivial_phase_claim(threshold=lambda s: NAN).run(CTX)
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "numerically zero" not in res.reason


def test_symbolic_zero_nan_is_undecided_not_zero():
    x = sp.Symbol("x", positive=True)
    c = symbolic_zero("nan", sp.nan * x, substitutions=[{x: 1}])
    assert c.verdict is Verdict.INCONCLUSIVE and "numerically zero" not in c.reason
    assert symbolic_zero("false", x - 1, substitutions=[{x: 2}]).verdict is Verdict.REFUTED
    assert symbolic_zero("true", sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1, substitutions=[{x: 2}]).verdict \
        is Verdict.VERIFIED
