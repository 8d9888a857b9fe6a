"""Budgets that decide a result count work; the wall clock is only a safety net (issue 28).

Each site runs under a patched clock of its module (``time.perf_counter`` advancing by a fixed step
at every reading: a machine far slower than the work model, or a neighbour hogging the cores):

- below the safety net the result is bit-identical to the one under the real clock (same verdict,
  same value, same step/evaluation counts): the clock decides nothing;
- a clock that jumps past the safety net stops the run, and the result says exactly that
  ("stopped by the wall-clock safety limit (N s) ...; the work budget (M ...) was not reached").
"""

import time
from types import SimpleNamespace

import numpy as np
import pytest

from proofs_check.claims import ntk as cl
from solvers import feature_collapse as FC
from solvers import ntk as sv
from theory import ntk as th
from theory.feature_collapse import FCInstance

REF = th.NTKInstance(3, 4, (1.0, 0.6, 0.2))
FCI = FCInstance(n_c=2, L=2, s_c=2, d=3, lam=0.1)


class JumpClock:
    """A ``time`` stand-in whose ``perf_counter`` advances by ``step`` seconds at every reading."""

    def __init__(self, step: float):
        self.t, self.step, self.readings = 0.0, float(step), 0

    def perf_counter(self) -> float:
        self.t += self.step
        self.readings += 1
        return self.t

    def module(self):
        return SimpleNamespace(perf_counter=self.perf_counter, process_time=time.process_time,
                               monotonic=time.monotonic)


# ------------------------------------------------------------------ solvers/ntk.py (DOP853 flows)

def _claim_flow():
    return sv.run_flow(REF, sv.init_random(REF, 4, 1e-6, seed=0), 30.0, n_grid=201, **cl._claim_budget())


def test_ntk_claim_flow_is_the_same_under_a_slow_clock(monkeypatch):
    quiet = _claim_flow()
    assert quiet.trajectory.stopped is None
    clock = JumpClock(0.5)  # a few hundred readings: ~100-200 s of "wall time", below the 600 s net
    monkeypatch.setattr(sv, "time", clock.module())
    slow = _claim_flow()
    assert 60.0 < clock.t < cl.CLAIM_SAFETY_S  # past the former 60 s wall-clock budget of a claim's flow
    assert slow.trajectory.stopped is None
    assert slow.trajectory.steps == quiet.trajectory.steps
    assert slow.solution.value == quiet.solution.value  # bit for bit
    np.testing.assert_array_equal(slow.trajectory.final.pack(), quiet.trajectory.final.pack())


def test_ntk_claim_flow_past_the_safety_net_says_so(monkeypatch):
    monkeypatch.setattr(sv, "time", JumpClock(1000.0).module())
    rep = _claim_flow()
    stopped = rep.trajectory.stopped
    assert stopped.startswith(f"stopped by the wall-clock safety limit ({cl.CLAIM_SAFETY_S:g} s) at t = ")
    assert stopped.endswith(f"the work budget ({cl.CLAIM_MAX_STEPS} DOP853 steps) was not reached")
    assert rep.trajectory.T < 30.0


def test_ntk_work_budget_binds_the_same_at_any_clock(monkeypatch):
    quiet = sv.run_flow(REF, sv.init_random(REF, 4, 1e-6, seed=0), 30.0, n_grid=51, max_steps=40, safety_s=600.0)
    monkeypatch.setattr(sv, "time", JumpClock(5.0).module())
    slow = sv.run_flow(REF, sv.init_random(REF, 4, 1e-6, seed=0), 30.0, n_grid=51, max_steps=40, safety_s=600.0)
    for r in (quiet, slow):
        assert r.trajectory.stopped.startswith("work budget reached at t = ")
        assert r.trajectory.stopped.endswith("(40 DOP853 steps)") and r.trajectory.steps == 40
    assert slow.trajectory.T == quiet.trajectory.T and slow.solution.value == quiet.solution.value


def test_ntk_solve_verdict_is_the_same_under_a_slow_clock_and_inconclusive_past_the_net(monkeypatch):
    quiet = cl.check_instance(REF, gamma=(1.0, 0.6, 0.2)).to_dict()
    assert quiet["verdict"] == "VERIFIED"
    clock = JumpClock(0.5)
    monkeypatch.setattr(sv, "time", clock.module())
    slow = cl.check_instance(REF, gamma=(1.0, 0.6, 0.2)).to_dict()
    assert cl.DEFAULT_MAX_SECONDS < clock.t < cl.SOLVE_SAFETY_FACTOR * cl.DEFAULT_MAX_SECONDS  # past the former budget
    assert slow["verdict"] == quiet["verdict"]
    assert [(c["id"], c["verdict"]) for c in slow["claims"]] == [(c["id"], c["verdict"]) for c in quiet["claims"]]
    assert slow["solution"]["value"] == quiet["solution"]["value"]
    assert slow["routes"]["feature_flow"]["steps"] == quiet["routes"]["feature_flow"]["steps"]
    monkeypatch.setattr(sv, "time", JumpClock(1e5).module())
    hit = cl.check_instance(REF, gamma=(1.0, 0.6, 0.2)).to_dict()
    assert hit["verdict"] == "INCONCLUSIVE"
    assert "stopped by the wall-clock safety limit (1.2e+03 s)" in hit["reason"]
    assert "the work budget (" in hit["reason"] and "DOP853 steps) was not reached" in hit["reason"]
    rates = next(c for c in hit["claims"] if c["id"] == "ntk-rates")
    assert rates["verdict"] == "INCONCLUSIVE"


# ------------------------------------------------------------------ solvers/feature_collapse.py (L-BFGS starts)

def test_feature_collapse_solve_is_the_same_under_a_slow_clock(monkeypatch):
    quiet = FC.solve(FCI, n_starts=2, certify=False)
    assert quiet.diagnostics["budget_reached"] is False
    clock = JumpClock(5.0)
    monkeypatch.setattr(FC, "time", clock.module())
    slow = FC.solve(FCI, n_starts=2, certify=False)
    assert FC.SOLVE_BUDGET_S < clock.t < FC.SAFETY_WALL_S  # past the former 60 s wall-clock budget
    assert slow.value == quiet.value
    assert slow.diagnostics["start_values"] == quiet.diagnostics["start_values"]
    assert slow.diagnostics["evaluations"] == quiet.diagnostics["evaluations"]
    assert slow.diagnostics["message"] == "work budget not reached"


def test_feature_collapse_work_budget_binds_the_same_at_any_clock(monkeypatch):
    quiet = FC.solve(FCI, n_starts=3, certify=False, max_evals=25)
    monkeypatch.setattr(FC, "time", JumpClock(3.0).module())
    slow = FC.solve(FCI, n_starts=3, certify=False, max_evals=25)
    for r in (quiet, slow):
        assert r.diagnostics["budget_reached"] and not r.diagnostics["stopped_by_wall_safety"]
        assert r.diagnostics["message"] == "work budget reached (25 evaluations)"
        assert 25 <= r.diagnostics["evaluations"] <= 25 + 25  # scipy may finish the iteration it is in
    assert slow.value == quiet.value and slow.diagnostics["start_values"] == quiet.diagnostics["start_values"]


def test_feature_collapse_solve_past_the_safety_net_says_so(monkeypatch):
    monkeypatch.setattr(FC, "time", JumpClock(1e4).module())
    sol = FC.solve(FCI, n_starts=3, certify=False)
    d = sol.diagnostics
    assert d["budget_reached"] and d["stopped_by_wall_safety"]
    assert d["message"] == (f"stopped by the wall-clock safety limit ({FC.SAFETY_WALL_S:g} s); the work budget "
                            f"({FC.eval_budget(FCI)} evaluations) was not reached")
    assert len(d["start_values"]) < 3


def test_feature_collapse_claim_verdict_is_the_same_under_a_slow_clock(monkeypatch):
    from proofs_check.claims import feature_collapse as FCC

    quiet = FCC.check_instance(FCI, n_starts=2).to_dict()
    monkeypatch.setattr(FC, "time", JumpClock(1.0).module())
    slow = FCC.check_instance(FCI, n_starts=2).to_dict()
    assert slow["verdict"] == quiet["verdict"]
    assert [(c["id"], c["verdict"]) for c in slow["claims"]] == [(c["id"], c["verdict"]) for c in quiet["claims"]]
    assert slow["routes"]["lbfgs"]["value"] == quiet["routes"]["lbfgs"]["value"]
    monkeypatch.setattr(FC, "time", JumpClock(1e4).module())
    hit = FCC.check_instance(FCI, n_starts=2).to_dict()
    assert hit["verdict"] == quiet["verdict"]  # the certificates decide; the L-BFGS search is auxiliary
    assert hit["routes"]["lbfgs"]["stopped_by_wall_safety"] is True
    assert any(d.startswith("L-BFGS: stopped by the wall-clock safety limit (") for d in hit["diagnostics"])


@pytest.mark.parametrize("bad", [0, -1, 1.5, "x"])
def test_feature_collapse_max_evals_is_validated(bad):
    with pytest.raises(ValueError, match="max_evals"):
        FC.solve(FCI, n_starts=1, certify=False, max_evals=bad)


# ------------------------------------------------------------------ solvers/crh.py critical_point (L-BFGS)

def test_crh_critical_point_is_the_same_under_a_slow_clock_and_says_so_past_the_net(monkeypatch):
    from proofs_check.claims import _crh_identities as CI
    from proofs_check.core import RunContext, Verdict
    from solvers import crh as S

    cfg = CI.CRIT_QUICK
    quiet = S.critical_point(cfg, CI.CRIT_GAMMA, max_iter=300)
    clock = JumpClock(1.0)
    monkeypatch.setattr(S, "time", clock.module())
    slow = S.critical_point(cfg, CI.CRIT_GAMMA, max_iter=300)
    assert clock.readings > 50 and clock.t < S.SAFETY_WALL_S
    assert slow.value == quiet.value and slow.diagnostics["iterations"] == quiet.diagnostics["iterations"]
    assert slow.diagnostics["budget_reached"] is False
    monkeypatch.setattr(S, "time", JumpClock(1e5).module())
    hit = S.critical_point(cfg, CI.CRIT_GAMMA, max_iter=300)
    assert hit.diagnostics["budget_reached"] is True
    assert hit.diagnostics["message"] == (f"stopped by the wall-clock safety limit ({S.SAFETY_WALL_S:g} s); the work "
                                          "budget (300 iterations) was not reached")
    # the stationarity claim reads the stopped point as undecided, never as a failed hypothesis
    CI._critical.cache_clear()
    try:
        r = CI.stationarity_claim().run(RunContext(seed=0))
    finally:
        CI._critical.cache_clear()
    assert r.verdict == Verdict.INCONCLUSIVE and "stopped by the wall-clock safety limit" in r.reason


# ------------------------------------------------------------------ proofs_check/tables.py (--rigorous pass)

def _rigorous_table(monkeypatch, step):
    import proofs_check.tables as TB
    from proofs_check.claims import scl as SC
    from theory.scl import SCLInstance

    reports = [SC.check_instance(SCLInstance((2, 2), 0.5, 2)), SC.check_instance(SCLInstance((3, 3), 0.5, 3))]
    table = TB.Table(["k"], [[2], [3]], caption="t")
    if step is not None:
        clock = JumpClock(step)
        monkeypatch.setattr(time, "perf_counter", clock.perf_counter)  # add_rigorous imports time locally
    try:
        return TB.add_rigorous(table, reports, labels=["a", "b"])
    finally:
        monkeypatch.undo()


def test_rigorous_table_rows_are_the_same_under_a_slow_clock_and_say_so_past_the_net(monkeypatch):
    pytest.importorskip("flint")  # the rows' brackets are ball arithmetic (the rigorous extra)
    import proofs_check.tables as TB

    quiet = _rigorous_table(monkeypatch, None)
    assert all(r[1] is not None for r in quiet.rows)  # both rows bracketed
    slow = _rigorous_table(monkeypatch, 100.0)  # 100 s per reading: the old 100 s budget skipped row 2
    assert slow.rows == quiet.rows
    hit = _rigorous_table(monkeypatch, 0.6 * TB.RIGOROUS_TABLE_BUDGET_S)  # row 1 inside the net, row 2 past it
    assert hit.rows[0] == quiet.rows[0] and hit.rows[1][1] is None
    assert any(f"stopped by the wall-clock safety limit ({TB.RIGOROUS_TABLE_BUDGET_S:g} s)" in n
               and "the work budget (every row) was not reached" in n for n in hit.notes)


# ------------------------------------------------------------------ solvers/rigorous/scl.py (mini-batch re-solve)

def test_rigorous_minibatch_scl_bracket_is_the_same_under_a_slow_clock(monkeypatch):
    pytest.importorskip("flint")
    from solvers import rigorous as R
    from solvers import scl_factored as SF

    params = {"counts": [3, 3, 3], "tau": 0.5, "d": 3, "nonneg": False,
              "batches": [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]]}
    quiet = R.scl_from_instance(params)
    clock = JumpClock(1.0)  # the former 60 s budget ran out after 60 readings
    monkeypatch.setattr(SF, "time", clock.module())
    slow = R.scl_from_instance(params)
    assert clock.readings > 60 and clock.t < R.SCL_MINIBATCH_SOLVER_BUDGET_S
    assert slow.lower_bound == quiet.lower_bound and slow.upper_bound == quiet.upper_bound
    assert "safety limit" not in str(slow.details)


# ------------------------------------------------------------------ solvers/ufm.py (classic UFM multi-start; audited)

def test_classic_ufm_factored_route_is_the_same_under_a_slow_clock_and_says_so_past_the_net(monkeypatch):
    from solvers import ufm as U
    from solvers import ufm_general as SG
    from theory.ufm import UFMInstance

    inst = UFMInstance(loss="ce", k=4, n=3, d=4, lw=5e-3, lh=5e-3, lb=1e-2)
    quiet = U.solve_factored(inst, starts=2, seed=0, time_budget=SG.WALL_SAFETY_S)
    clock = JumpClock(1.0)
    monkeypatch.setattr(U, "time", clock.module())
    slow = U.solve_factored(inst, starts=2, seed=0, time_budget=SG.WALL_SAFETY_S)
    assert clock.readings > 20 and clock.t < SG.WALL_SAFETY_S
    assert slow.value == quiet.value and slow.diagnostics["start_values"] == quiet.diagnostics["start_values"]
    assert slow.diagnostics["time_budget_reached"] is False
    monkeypatch.setattr(U, "time", JumpClock(1e5).module())
    hit = U.solve_factored(inst, starts=2, seed=0, time_budget=SG.WALL_SAFETY_S)
    assert hit.diagnostics["time_budget_reached"] is True and hit.diagnostics["starts_run"] == 1
