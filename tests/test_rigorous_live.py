"""`solve`, `table` and `sweep --rigorous` judge the live SolveReport (issue 31 item 2): the ball recipe bounds the
candidate the check already holds, so --rigorous adds no solver call and reads no dictionary back; only a saved
report (a dict) is read back, by the family's one SAVED_READERS function."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flint")

from proofs_check import rigorous as RG  # noqa: E402
from proofs_check.cli import main  # noqa: E402
from solvers import ufm_general as SG  # noqa: E402

LAM = ["--lambda-w", "1e-3", "--lambda-h", "1e-3"]


@pytest.fixture
def solver_calls(monkeypatch):
    """Counts the calls of the any-loss UFM engine: ``n`` its solvers (grouped and class-reduced factored),
    ``entry`` its one entry point ``solvers.ufm_general.solve``."""
    calls = {"n": 0, "entry": 0}
    for name, key in (("solve_grouped", "n"), ("solve_factored", "n"), ("solve", "entry")):
        real = getattr(SG, name)

        def counted(*a, _real=real, _key=key, **k):
            calls[_key] += 1
            return _real(*a, **k)

        monkeypatch.setattr(SG, name, counted)
    return calls


@pytest.fixture
def no_saved_reader(monkeypatch):
    """A live path must never read its report back from a dictionary."""
    def boom(report):
        raise AssertionError(f"the {report.get('family')} report was read back from its dict")

    for fam in list(RG.SAVED_READERS):
        monkeypatch.setitem(RG.SAVED_READERS, fam, boom)


def _solve(capsys, argv):
    rc = main(["solve", "ufm"] + argv + ["-d", "4"] + LAM + ["--json"])
    out = json.loads(capsys.readouterr().out)
    return rc, {c["id"]: (c["verdict"], c.get("rigorous")) for c in out["claims"]}, out


# the verdicts before the change (each check: verdict, rigorous), measured with the re-solving path
CE = {"optimal-value": ("VERIFIED", True), "minimiser-unique": ("VERIFIED", True),
      "geometry-simplex-etf": ("VERIFIED", True)}
IMBALANCED = {"optimal-value": ("VERIFIED", True), "minority-collapse-threshold": ("VERIFIED", False),
              "minimiser-unique": ("VERIFIED", False), "minority-geometry": ("VERIFIED", False),
              "class-mean-cosines": ("VERIFIED", False)}


@pytest.mark.parametrize("argv,expected,plain_calls,rigorous", [
    (["--classes", "4", "--per-class", "3"], CE, 1, True),
    (["--loss", "mse", "--classes", "4", "--per-class", "3"], CE, 1, True),
    # the check's solve and its minority-collapse solve; the statements about the minimiser keep float evidence
    (["--counts", "6,6,2,1"], IMBALANCED, 2, False),
])
def test_solve_ufm_rigorous_adds_no_solver_call(capsys, solver_calls, no_saved_reader, argv, expected, plain_calls,
                                                rigorous):
    rc, plain, _ = _solve(capsys, argv)
    # plain_calls is the fewest solves the route takes; the geometry certificate may polish its candidate once
    # more (polish_for_geometry) when the solve's gap is not yet small enough, which depends on the OpenBLAS
    # kernel's rounding (one more on Haswell for the imbalanced case). What this test guards is that
    # --rigorous adds no call to the plain run's count.
    n_plain = solver_calls["n"]
    assert rc == 0 and plain_calls <= n_plain <= plain_calls + 1 and solver_calls["entry"] == 1
    solver_calls.update(n=0, entry=0)
    rc, rig, out = _solve(capsys, argv + ["--rigorous"])
    # before: one solver call more (the candidate solved again from the report's dict)
    assert rc == 0 and solver_calls["n"] == n_plain and solver_calls["entry"] == 1
    assert rig == expected
    assert {k: v for k, (v, _) in rig.items()} == {k: v for k, (v, _) in plain.items()}
    assert out["certificate"]["rigorous"]["lower"] is not None and out["rigorous"] is rigorous


def _records(capsys) -> list[dict]:
    t = json.loads(capsys.readouterr().out)
    return [dict(zip(t["columns"], r)) for r in t["rows"]]


def test_table_ufm_rigorous_bounds_each_rows_certified_candidate(capsys, solver_calls, no_saved_reader):
    # balanced rows with a closed form: certify_value solves nothing, and neither does --rigorous (before: one
    # grouped solve per row); the imbalanced row: the one solve of certify_value
    rc = main(["table", "ufm", "--classes", "3,4", "--per-class", "2", "--lambda", "1e-3", "--rigorous",
               "--format", "json"])
    assert rc == 0 and solver_calls["n"] == 0
    recs = _records(capsys)
    assert len(recs) == 2 and all(r["value_statement"] == "VERIFIED" and r["rigorous"] is True for r in recs)
    rc = main(["table", "ufm", "--counts", "6,6,2,1", "--lambda", "1e-3", "--rigorous", "--format", "json"])
    recs = _records(capsys)
    assert rc == 0 and solver_calls["n"] == 1
    assert recs[0]["value_statement"] == "VERIFIED" and recs[0]["rigorous"] is True


def test_sweep_ufm_rigorous_judges_the_live_report(no_saved_reader):
    from proofs_check import sweep
    from proofs_check.core import SolveReport
    from proofs_check.families import ufm as F

    params = {"loss": "ce", "k": 3, "n": 2, "d": 3, "lw": 1e-2, "lh": 1e-2, "lb": 0.0, "method": "auto", "starts": 2}
    assert isinstance(F._sweep_ufm_report(params, 0), SolveReport)
    res = sweep.rigorous_result(sweep.sweepables()["ufm"], params, 0)
    assert res["verdict"] == "VERIFIED" and res["rigorous"] is True and res["rigorous_lower"] <= res["rigorous_upper"]


def test_live_report_without_its_candidate_is_unsupported_not_solved_again(solver_calls):
    from proofs_check.claims.ufm import check_general

    rep = check_general(SG.classification(_ce(3), [2, 2, 2], 3, 1e-3, 1e-3), starts=1)
    n = solver_calls["n"]
    rep.live = {}
    out = RG.apply(rep)
    assert solver_calls["n"] == n
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is None and rig["status"] == "unsupported" and "no second solve" in rig["reason"]
    assert out["rigorous"] is False and out["verdict"] == rep.verdict.value  # the float verdicts stand


def test_saved_report_is_read_back_by_its_family_reader(solver_calls):
    """A saved `solve ufm` report (a dict) carries no candidate: its reader rebuilds the problem and solves once."""
    from proofs_check.claims.ufm import check_general

    rep = check_general(SG.classification(_ce(3), [2, 2, 2], 3, 1e-3, 1e-3), starts=1)
    saved = json.loads(json.dumps(rep.to_dict()))
    n = solver_calls["n"]
    out = RG.apply(saved)
    assert solver_calls["n"] == n + 1
    assert out["rigorous"] is True and {c["id"]: c["verdict"] for c in out["claims"]}["optimal-value"] == "VERIFIED"


def _ce(K):
    from solvers import losses as L

    return L.make_loss("ce", K)
