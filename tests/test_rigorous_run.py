"""`ncproofs run --rigorous`: value statements of a run judged in ball arithmetic (docs/rigorous.md).

The claims are the registry's own (their predictions come from the theory modules); the false variants
are built with the claim factories and a prediction off by 1e-6 relative, which the rigorous bracket
(about 1e-15 wide) must refute."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flint")

from proofs_check import cli  # noqa: E402
from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import scl as CS  # noqa: E402
from proofs_check.claims import ufm as CU  # noqa: E402
from proofs_check.core import RunContext, Verdict  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from theory import scl as TS  # noqa: E402
from theory import ufm as TU  # noqa: E402
from theory._validate import InputError  # noqa: E402


def _run(tmp_path, *args):
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    code = cli.main(["run", "--quiet", "--report", str(md), "--json", str(out), *args])
    return code, json.loads(out.read_text()), md.read_text()


def test_run_rigorous_marks_value_claims_proven(tmp_path, capsys):
    code, rep, md = _run(tmp_path, "--only", "ufm-ce-optimal-value", "--only", "ufm-mse-collapse-etf", "--rigorous")
    assert code == 0 and rep["rigorous"] is True
    assert sorted(rep["rigorous_claims"]) == ["ufm-ce-optimal-value", "ufm-mse-collapse-etf"]
    for c in rep["claims"]:
        assert c["verdict"] == "VERIFIED" and c["rigorous"] is True
        judged = [ch for ch in c["checks"] if "rigorous" in ch]
        assert judged and all(ch["rigorous"] is True for ch in judged)
        for ch in judged:
            lo, up = ch["evidence"]["rigorous_lower"], ch["evidence"]["rigorous_upper"]
            assert lo <= ch["evidence"]["predicted"] + ch["evidence"]["tolerance"]
            assert up >= ch["evidence"]["predicted"] - ch["evidence"]["tolerance"]
            assert 0 <= up - lo <= 1e-8 * abs(up)
    # statements about the minimiser are not judged by the value bracket
    geo = [ch for ch in rep["claims"][1]["checks"] if "geometry" in ch["name"] or "collapse" in ch["name"]]
    assert geo and all("rigorous" not in ch for ch in geo)
    assert "VERIFIED*" in capsys.readouterr().out
    assert "(rigorous)" in md


def test_run_without_rigorous_carries_no_rigorous_marks(tmp_path):
    code, rep, md = _run(tmp_path, "--only", "ufm-ce-optimal-value")
    assert code == 0 and rep["rigorous"] is False and rep["rigorous_claims"] is None
    assert rep["claims"][0]["rigorous"] is False
    assert all("rigorous" not in ch for ch in rep["claims"][0]["checks"])
    assert "(rigorous)" not in md


@pytest.mark.parametrize("loss,sign", [("ce", 1), ("ce", -1), ("mse", 1)])
def test_false_optimum_is_refuted_in_balls_inside_a_run(loss, sign):
    def predict(inst):
        return TU.optimum(inst).value * (1 + sign * 1e-6)

    res = CU.value_claim(loss, predict=predict).run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED and not res.rigorous
    refuted = [ch for ch in res.checks if ch.verdict is Verdict.REFUTED]
    assert refuted and all("ball arithmetic" in ch.reason for ch in refuted)


def test_false_scl_bound_is_refuted_in_balls_inside_a_run():
    def bound(counts, tau):
        return TS.theorem1_bound(counts, tau) * (1 + 1e-6)

    res = CS.make_theorem1_claim(bound=bound).run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED
    assert any(ch.verdict is Verdict.REFUTED and "ball arithmetic" in ch.reason for ch in res.checks)


def test_unsupported_recipe_keeps_float_verdicts_and_is_not_rigorous(monkeypatch):
    def unsupported(out, prec):
        raise R.Unsupported("test: no recipe")

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", unsupported)
    res = CU.value_claim("ce").run(RunContext(rigorous=True))
    assert res.verdict is Verdict.VERIFIED and res.rigorous is False
    judged = [ch for ch in res.checks if ch.rigorous is not None]
    assert judged and all(ch.rigorous is False for ch in judged)
    assert all("test: no recipe" in ch.evidence.get("rigorous_status", "") for ch in judged)


def test_a_bracket_that_misses_the_claim_refutes_it(monkeypatch):
    from flint import arb

    def shifted(out, prec):  # a (test) bracket strictly above every claimed optimum of the claim
        return R.RigorousBound(arb(1e3), arb(1e3 + 1e-9), "test", prec)

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", shifted)
    res = CU.value_claim("ce").run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED


def test_run_rigorous_without_flint_exits_2_before_work(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flint" else real(name, *a))
    out = tmp_path / "r.json"
    code = cli.main(["run", "--quiet", "--only", "ufm-ce-optimal-value", "--rigorous", "--report", "", "--json",
                     str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "python-flint" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_run_context_rigorous_must_be_bool(bad):
    with pytest.raises(InputError, match="rigorous"):
        RunContext(rigorous=bad)
