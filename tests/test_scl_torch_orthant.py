"""UFM+ on the torch backend: scipy's L-BFGS-B on the bounded form h = u/||u||, u >= 0, with torch evaluating loss
and gradient. torch.optim.LBFGS on the smooth map h = v∘v/||v∘v|| converged sublinearly where an orthant constraint
is weakly active (the loss is quartic in v there): on the mini-batch instance below one start took 4926
evaluations, and the 200-iteration confirmation solve of `solve scl --backend torch` ended unconverged.
Expected values are the reconstructed closed forms of theory.scl (Kini et al. Theorem 2), not solver output."""

from __future__ import annotations

import types

import numpy as np
import pytest

from proofs_check.claims import scl as C
from proofs_check.core import Verdict
from solvers import scl as S
from solvers.scl_engine import BoundRoutes
from theory import scl as T

torch = pytest.importorskip("torch", reason="torch not installed (optional extra: pip install torch)")

# classes 0 and 1 never meet in a batch with a positive of either: a weakly active constraint at the minimiser
SLOW_BATCHES = [[0, 1, 4, 5], [2, 3, 6], [0, 2, 5, 6]]
TWO_GROUPS = [list(range(10)), list(range(10, 20))]  # 10 classes x 2 samples, two batches of five classes


def test_torch_orthant_minibatch_converges_in_few_evaluations():
    inst = T.SCLInstance((2, 2, 3), 0.5, 4, True, SLOW_BATCHES)
    t = S.solve_factored(inst, starts=2, seed=1, backend="torch", dtype="float64")
    assert t.diagnostics["backend"] == "torch" and t.diagnostics["fallback"] is None
    assert t.converged and t.diagnostics["kkt_residual"] <= S.KKT_TOL
    assert t.diagnostics["evaluations"] <= 200  # was 4999 (torch.optim.LBFGS on v∘v)
    assert t.value == pytest.approx(float(T.theorem2_bound((2, 2, 3), SLOW_BATCHES, 0.5)), rel=1e-12)
    assert np.all(t.variables["H"] >= 0) and np.allclose(np.linalg.norm(t.variables["H"], axis=0), 1.0)


def test_torch_confirmation_budget_is_enough_on_a_small_minibatch():
    """The budget of the confirmation solve (200 iterations): before, KKT residual 1.9e-5, not converged."""
    inst = T.SCLInstance((2,) * 10, 0.3, 11, True, TWO_GROUPS)
    t = S.solve_factored(inst, starts=1, seed=0, maxiter=200, backend="torch", dtype="float64")
    assert t.converged and t.diagnostics["evaluations"] < 200
    assert t.value == pytest.approx(float(T.theorem2_bound((2,) * 10, TWO_GROUPS, 0.3)), rel=1e-12)


def test_torch_and_numpy_orthant_agree_and_stop_at_target():
    inst = T.SCLInstance((3, 2, 3), 0.5, 4, True, None)
    a = S.solve_factored(inst, starts=2, seed=0, backend="numpy")
    t = S.solve_factored(inst, starts=2, seed=0, backend="torch", dtype="float64")
    assert a.converged and t.converged and t.value == pytest.approx(a.value, rel=1e-12)
    target = float(T.theorem2_bound((3, 2, 3), None, 0.5)) + 1e-3
    s = S.solve_factored(inst, starts=3, seed=0, backend="torch", stop_at=target)
    assert s.value <= target and len(s.diagnostics["start_values"]) == 1


def test_torch_float32_orthant_is_judged_in_float64():
    inst = T.SCLInstance((2, 2, 3), 0.5, 4, True, SLOW_BATCHES)
    t = S.solve_factored(inst, starts=1, seed=0, backend="torch", dtype="float32")
    H = t.variables["H"]
    assert t.diagnostics["dtype"] == "float32" and H.dtype == np.float64
    assert t.value == S.scl_loss(H, inst.labels, SLOW_BATCHES, inst.tau, grad=False)
    assert t.converged == (t.diagnostics["kkt_residual"] <= S.KKT_TOL)
    assert t.value == pytest.approx(float(T.theorem2_bound((2, 2, 3), SLOW_BATCHES, 0.5)), rel=1e-5)


@pytest.mark.parametrize("converged", [True, False])
def test_unconverged_confirmation_is_not_reported_as_a_second_optimum(converged):
    inst = T.SCLInstance((2, 2, 3), 0.5, 4, True, SLOW_BATCHES)
    bound = float(T.theorem2_bound((2, 2, 3), SLOW_BATCHES, 0.5))
    bounds = BoundRoutes()
    bounds.offer("closed form", bound)
    res = types.SimpleNamespace(bounds=bounds, confirmation={"value": bound + 1e-12, "iterations_budget": 200,
                                                             "converged": converged})
    chk = C._confirmation_check("confirmation-solve", res, inst)
    assert chk.verdict == Verdict.VERIFIED and chk.evidence["converged"] is converged
    assert ("not converged" in chk.reason) is (not converged)
    if not converged:
        assert "not a second determination" in chk.reason and "200 iterations" in chk.reason
